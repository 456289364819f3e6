"""Seed 003's distillation tool: `memento_extract` (a transcript in, novel memories stored)."""

from __future__ import annotations

from memento.mcp.tools import ToolSpec
from memento.models import CallContext
from memento.protocol_face.distill_models import DistillInput, DistillResult
from memento.service import MemoryService


def extract(service: MemoryService, inp: DistillInput, ctx: CallContext) -> DistillResult:
    """Distill a transcript into the caller's namespace (protocol_face/distill.py)."""
    return service.protocol.distill.extract(inp, ctx)


DISTILL_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "memento_extract",
        "Distill a transcript",
        "Store a transcript's novel facts, decisions, observations and instructions as memories (source:distill);"
        " what is already stored is skipped.",
        DistillInput,
        extract,
        DistillResult,
    ),
)
