"""The contract between credentials (access keys, OAuth tokens) and the faces that check them."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Protocol

from ..errors import Forbidden, InvalidArgument
from ..models import DEFAULT_AGENT, MAINTENANCE_AGENTS, CallContext

WORKSPACE_HEADER = "X-Memento-Workspace"
WORKSPACE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")


def workspace_namespace(bound: str | None, workspace: str) -> str:
    """The agent namespace of seed 003's `workspace` for a credential bound to `bound` (None: an
    admin credential). An admin's workspace is the namespace of that name; an agent's workspace
    lives inside its own allowance: its own name is its own namespace, any other name `W` is the
    namespace `<agent>:W`. A workspace name has no `:`, so no name reaches another agent's
    namespace, and the maintenance names (`system`, `admin`) are refused for everyone."""
    name = workspace.strip()
    if not WORKSPACE_NAME.fullmatch(name):
        raise InvalidArgument(
            f"workspace {workspace[:80]!r} is not a workspace name: 1-64 letters, digits, '_', '.', '@' or '-', starting with a letter or digit"
        )
    if name in MAINTENANCE_AGENTS:
        raise Forbidden(f"{name!r} is reserved for maintenance and cannot be a workspace")
    if bound is None or bound in MAINTENANCE_AGENTS or name == bound:
        return name
    if bound == DEFAULT_AGENT:
        raise Forbidden("a credential bound to the shared 'default' pool cannot open workspaces")
    return f"{bound}:{name}"


@dataclass(frozen=True)
class Principal:
    """An authenticated caller.

    `agent_id` is the namespace the credential is bound to; None means admin (any namespace,
    maintenance scope). `read_only` limits it to search, recall and context (002 §7).
    """

    subject: str  # key name, or OAuth client id
    agent_id: str | None
    read_only: bool = False
    scopes: frozenset[str] = frozenset()
    kind: str = "access_key"  # access_key | oauth | anonymous
    workspace: str | None = None  # seed 003's workspace this caller named; agent_id is its namespace

    def call_context(self, session_id: str | None) -> CallContext:
        """The service-level context of a call made with this credential."""
        return CallContext(session_id=session_id, agent_id=self.agent_id, read_only=self.read_only, workspace=self.workspace)

    def in_workspace(self, workspace: str) -> Principal:
        """This credential working in seed 003's `workspace` (workspace_namespace says which
        namespace that is); raises InvalidArgument or Forbidden for a name it may not use."""
        return replace(self, agent_id=workspace_namespace(self.agent_id, workspace), workspace=workspace.strip())


# Authentication disabled (no key configured, loopback only): full access to every namespace.
ANONYMOUS = Principal(subject="anonymous", agent_id=None, kind="anonymous")


class TokenVerifier(Protocol):
    """Turns a bearer token into a Principal, or None when the token is not one of its own;
    raises `memento.errors.Unavailable` when it cannot tell right now (its store is down)."""

    def verify(self, token: str, *, resource: str | None = None) -> Principal | None: ...
