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
from .distill import Distiller
from .identity import Identity
from .memories import Memories
from .skips import Skips

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
        self.distill = Distiller(self)

    def language_model(self, ctx: CallContext) -> Complete | None:
        """The model that drafts for this call: the operator's configured one, else the one the
        client lends (MCP sampling), else None (the deterministic drafts are used)."""
        return self.llm or ctx.complete

    def read_scope(self, ctx: CallContext) -> AgentScope:
        """The namespace a reading call of this face works in."""
        scope = call_scope(None, ctx)
        self.opened(scope, ctx)
        return scope

    def write_scope(self, ctx: CallContext) -> AgentScope:
        """The namespace a changing call works in (refused for read-only credentials)."""
        scope = writable_scope(None, ctx, self.service.settings.shared_pool, pool=False)
        self.opened(scope, ctx)
        return scope

    def opened(self, scope: AgentScope, ctx: CallContext) -> None:
        """A call in `scope` arrived: a workspace named for the first time is created here."""


__all__ = ["ProtocolFace"]
