"""Seed 003's context call as a tool: `memento_context`."""

from __future__ import annotations

from memento.mcp.tools import ToolSpec
from memento.mcp.versions import ToolHints
from memento.models import CallContext
from memento.protocol_face.context import ContextCallInput, ContextCallResult
from memento.service import MemoryService


def memento_context(service: MemoryService, inp: ContextCallInput, ctx: CallContext) -> ContextCallResult:
    return service.protocol.context(inp, ctx)


CONTEXT_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "memento_context",
        "Context for a message",
        "Everything relevant for a message in one call: open working-memory items, recalled memories, skip-list warnings"
        " and the identity crystal. Call it at the start of a task or when the topic changes; heed skip warnings.",
        ContextCallInput,
        memento_context,
        ContextCallResult,
        ToolHints(read_only=True),
    ),
)
