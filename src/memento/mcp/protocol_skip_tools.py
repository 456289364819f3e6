"""Seed 003's skip-list tools (the `protocol` toolset): names and parameters as the protocol's
reference server has them, each a thin call into the face's skip list (protocol_face/skips.py)."""

from __future__ import annotations

from memento.mcp.tools import ToolSpec
from memento.mcp.versions import ToolHints
from memento.models import CallContext
from memento.protocol_face.skips import (
    SkipAddInput,
    SkipCheckInput,
    SkipCheckResult,
    SkipEntry,
    SkipListInput,
    SkipListResult,
    SkipRemoved,
    SkipRemoveInput,
)
from memento.service import MemoryService


def skip_add(service: MemoryService, inp: SkipAddInput, ctx: CallContext) -> SkipEntry:
    return service.protocol.skips.add(inp, ctx)


def skip_check(service: MemoryService, inp: SkipCheckInput, ctx: CallContext) -> SkipCheckResult:
    return service.protocol.skips.check(inp, ctx)


def skip_list(service: MemoryService, inp: SkipListInput, ctx: CallContext) -> SkipListResult:
    return service.protocol.skips.entries(inp, ctx)


def skip_remove(service: MemoryService, inp: SkipRemoveInput, ctx: CallContext) -> SkipRemoved:
    return service.protocol.skips.remove(inp, ctx)


_READ = ToolHints(read_only=True, idempotent=True)

SKIP_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "memento_skip_add",
        "Add to the skip list",
        "Add something not to do, mention or investigate for now, with the reason and a required expiry (skips are temporary).",
        SkipAddInput,
        skip_add,
        SkipEntry,
    ),
    ToolSpec(
        "memento_skip_check",
        "Check the skip list",
        "Before investigating a topic, check whether it is on the skip list (matched by words or by meaning); expired entries never match.",
        SkipCheckInput,
        skip_check,
        SkipCheckResult,
        _READ,
    ),
    ToolSpec(
        "memento_skip_list",
        "List the skip list",
        "List the unexpired skip-list entries with their ids (for memento_skip_remove).",
        SkipListInput,
        skip_list,
        SkipListResult,
        _READ,
    ),
    ToolSpec(
        "memento_skip_remove",
        "Remove a skip",
        "Remove a skip-list entry by id, when its condition was resolved early or it was added in error.",
        SkipRemoveInput,
        skip_remove,
        SkipRemoved,
        ToolHints(destructive=True, idempotent=True),
    ),
)
