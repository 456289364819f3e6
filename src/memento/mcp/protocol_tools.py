"""Seed 003's tools, the `protocol` toolset: each part of the face declares its tools in its own
module; this module puts them together in the order `tools/list` shows them."""

from __future__ import annotations

from memento.mcp.protocol_context_tools import CONTEXT_TOOLS
from memento.mcp.protocol_distill_tools import DISTILL_TOOLS
from memento.mcp.protocol_identity_tools import IDENTITY_TOOLS
from memento.mcp.protocol_item_tools import ITEM_TOOLS
from memento.mcp.protocol_memory_tools import MEMORY_TOOLS
from memento.mcp.protocol_skip_tools import SKIP_TOOLS
from memento.mcp.tools import ToolSpec

PROTOCOL_TOOLS: tuple[ToolSpec, ...] = CONTEXT_TOOLS + MEMORY_TOOLS + ITEM_TOOLS + SKIP_TOOLS + IDENTITY_TOOLS + DISTILL_TOOLS
