"""Seed 003's face (Memento Protocol) over the one engine: memories with expiry and linkages,
working-memory items and sections, the skip list, the identity crystal, workspaces, the context
call and distillation. Each part is a small service over MemoryService and the store protocol;
`ProtocolFace` holds them (`service.protocol`). The `protocol` toolset (mcp/protocol_tools.py)
and the REST routes under /v1 (rest/v1.py) are thin calls into it. docs/protocol.md.

Whose records a call reaches is decided once, here: `read_scope` and `write_scope` (the caller's
namespace; a named workspace is already its namespace, auth.principal.workspace_namespace), and
each opens the named workspace on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..access import call_scope, writable_scope
from ..models import AgentScope, CallContext, Complete
from .context import ContextCall
from .distill import Distiller
from .health import Health, HealthPart
from .identity import Identity
from .items import Items
from .memories import Memories
from .sections import Sections
from .skips import Skips
from .workspaces import Workspaces

if TYPE_CHECKING:
    from ..service import MemoryService


class ProtocolFace:
    """The parts of seed 003's face, each over `service`."""

    def __init__(self, service: MemoryService) -> None:
        self.service = service
        self.llm: Complete | None = None  # the operator's configured model (MEMENTO_LLM_*), set at start-up
        self.memories = Memories(self)  # memories with expiry and linkages (memories.py)
        self.skips = Skips(self)
        self.identity = Identity(self)
        self.items = Items(self)  # working-memory items (items.py)
        self.sections = Sections(self)  # the legacy markdown sections (sections.py)
        self.workspaces = Workspaces(self)  # workspace records (workspaces.py)
        self.health = Health(self)  # memento_health (health.py)
        self.context = ContextCall(self)  # the context call (context.py)
        self.distill = Distiller(self)  # distillation (distill.py)
        self.health_parts: list[HealthPart] = [self._skip_health, self._identity_health]  # memento_health's other parts

    def _skip_health(self, scope: AgentScope, ctx: CallContext) -> tuple[str, dict[str, object]]:
        return "skip_list", {"active": len(self.skips.store.skip_entries(scope, self.service.clock()))}

    def _identity_health(self, scope: AgentScope, ctx: CallContext) -> tuple[str, dict[str, object]]:
        latest, total = self.identity.store.identities(scope, 1)
        return "identity", {"snapshots": total, "latest_at": latest[0].created_at.isoformat() if latest else None}

    def language_model(self, ctx: CallContext) -> Complete | None:
        """The model that drafts for this call: the operator's configured one, else the one the
        client lends (MCP sampling), else None (the deterministic drafts are used)."""
        return self.llm or ctx.complete

    def read_scope(self, ctx: CallContext) -> AgentScope:
        """The namespace a reading call of this face works in."""
        scope = call_scope(None, ctx)
        self.opened(scope, ctx)
        return scope

    def write_scope(self, ctx: CallContext, *, open_workspace: bool = True) -> AgentScope:
        """The namespace a changing call works in (refused for read-only credentials); its named
        workspace is opened unless `open_workspace` is False (memento_init opens it itself)."""
        scope = writable_scope(None, ctx, self.service.settings.shared_pool, pool=False)
        if open_workspace:
            self.opened(scope, ctx)
        return scope

    def opened(self, scope: AgentScope, ctx: CallContext) -> None:
        """A call in `scope` arrived: a workspace named for the first time is created here."""
        self.workspaces.opened(scope, ctx)


__all__ = ["ProtocolFace"]
