"""Seed 003's workspaces. A workspace is an agent namespace (auth.principal.workspace_namespace
decides which one a name opens for a credential); this part keeps its record — the namespace, the
name it was opened by, when — and its five default sections. The first call of the face that
names a workspace creates both, in one transaction; two first calls at once create one
workspace. docs/protocol.md "Workspaces"."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, cast

from ..auth.principal import workspace_namespace
from ..errors import InvalidArgument
from ..models import MAINTENANCE_AGENTS, AgentScope, CallContext
from ..storage.protocol import WorkingMemoryStore
from .sections import DEFAULT_SECTIONS
from .workmem_models import InitResult, WorkspaceList, WorkspaceOut

if TYPE_CHECKING:
    from . import ProtocolFace

SYSTEM = "system"
KNOWN_MAX = 10_000  # namespaces remembered as opened (then forgotten all at once, read again)


def owner_of(ctx: CallContext) -> str | None:
    """The agent whose workspaces a caller lists: the namespace it works in without the workspace
    it named (`A:W` named W: A); None for an admin credential not narrowed to a namespace."""
    agent = ctx.agent_id
    if agent is None or agent in MAINTENANCE_AGENTS:
        return None
    suffix = f":{ctx.workspace}"
    return agent[: -len(suffix)] if ctx.workspace and agent.endswith(suffix) else agent


class Workspaces:
    """Open, create and list workspaces."""

    def __init__(self, face: ProtocolFace) -> None:
        self.face = face
        self.store = cast(WorkingMemoryStore, face.service.store)  # every backend is an AppStore
        self.known: set[str] = set()  # namespaces whose workspace record was read back (no read needed)

    def opened(self, scope: AgentScope, ctx: CallContext) -> None:
        """A call of the face arrived in `scope`: the workspace it names is created when it has no
        record yet. A read-only credential creates nothing (it reads an empty workspace)."""
        if ctx.workspace is None or ctx.read_only or scope.is_maintenance or scope.agent_id in self.known:
            return
        if self.store.workspace_of(scope) is not None:
            # Seen stored (so committed): later calls need no read. Records are never deleted.
            if len(self.known) >= KNOWN_MAX:
                self.known.clear()
            self.known.add(scope.agent_id)
            return
        self.store.open_workspace(scope, ctx.workspace, list(DEFAULT_SECTIONS), self.face.service.clock())

    def init(self, ctx: CallContext) -> InitResult:
        """Create the caller's workspace (the one it named, else its own namespace) with its default
        sections, unless it exists; says which."""
        scope = self.face.write_scope(ctx, open_workspace=False)
        if scope.is_maintenance:
            raise InvalidArgument("the maintenance namespace is not a workspace; name one (X-Memento-Workspace)")
        store, now = self.store, self.face.service.clock()
        created = store.open_workspace(scope, ctx.workspace or scope.agent_id, list(DEFAULT_SECTIONS), now)
        if not created:
            store.add_sections(scope, list(DEFAULT_SECTIONS), now)  # a workspace made before its sections were: complete it
        record = store.workspace_of(scope)
        assert record is not None
        shown = WorkspaceOut.of(record)
        message = (
            f"Workspace {shown.name!r} created with sections {', '.join(DEFAULT_SECTIONS)}. Read working memory at the start of every session."
            if created
            else f"Workspace {shown.name!r} already exists; use memento_read or memento_item_list to load it."
        )
        return InitResult(workspace=shown, already_existed=not created, sections=list(DEFAULT_SECTIONS), message=message)

    def create(self, name: str, ctx: CallContext) -> InitResult:
        """Create the workspace `name` of the caller's credential (POST /v1/workspaces): the
        namespace workspace_namespace gives it, as if the request had named it. A request already
        working in a workspace may only name that one."""
        if ctx.workspace is not None:
            if name.strip() != ctx.workspace:
                raise InvalidArgument(
                    f"this request works in workspace {ctx.workspace!r}; create another one without the X-Memento-Workspace header"
                )
            return self.init(ctx)
        return self.init(replace(ctx, agent_id=workspace_namespace(ctx.agent_id, name), workspace=name.strip()))

    def listing(self, ctx: CallContext) -> WorkspaceList:
        """The caller's workspaces: an agent's own namespace and its `<agent>:<name>` workspaces;
        every workspace record for an admin credential not narrowed to a namespace."""
        here = self.face.read_scope(ctx)
        owner = owner_of(ctx)
        store = self.store
        records = [WorkspaceOut.of(r) for r in store.list_workspaces(AgentScope(owner or SYSTEM))]
        if owner is not None and all(r.namespace != owner for r in records):
            records.insert(0, WorkspaceOut(name=owner, namespace=owner, created_at=None))  # its own namespace, never opened by name
        return WorkspaceList(workspaces=records, current=here.agent_id)


__all__ = ["DEFAULT_SECTIONS", "Workspaces", "owner_of"]
