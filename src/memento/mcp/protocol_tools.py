"""Seed 003's tools, the `protocol` toolset: each part of the face declares its tools in its own
module; this module puts them together in the order `tools/list` shows them."""

from __future__ import annotations

from memento.mcp.protocol_distill_tools import DISTILL_TOOLS
from memento.mcp.tools import ToolSpec

PROTOCOL_TOOLS: tuple[ToolSpec, ...] = ()
PROTOCOL_TOOLS = PROTOCOL_TOOLS + DISTILL_TOOLS
