"""Seed 003's identity-crystal tools (the `protocol` toolset): read the latest crystal, write a new
snapshot, list the history and crystallize one from the workspace's records, each a thin call
into the face's identity part (protocol_face/identity.py)."""

from __future__ import annotations

from memento.mcp.tools import ToolSpec
from memento.mcp.versions import ToolHints
from memento.models import CallContext
from memento.protocol_face.identity import (
    CrystallizeInput,
    CrystallizeResult,
    IdentityHistory,
    IdentityHistoryInput,
    IdentityInput,
    IdentityResult,
    IdentitySnapshot,
    IdentityUpdateInput,
)
from memento.service import MemoryService


def identity(service: MemoryService, inp: IdentityInput, ctx: CallContext) -> IdentityResult:
    return service.protocol.identity.get(inp, ctx)


def identity_update(service: MemoryService, inp: IdentityUpdateInput, ctx: CallContext) -> IdentitySnapshot:
    return service.protocol.identity.update(inp, ctx)


def identity_history(service: MemoryService, inp: IdentityHistoryInput, ctx: CallContext) -> IdentityHistory:
    return service.protocol.identity.history(inp, ctx)


def identity_crystallize(service: MemoryService, inp: CrystallizeInput, ctx: CallContext) -> CrystallizeResult:
    return service.protocol.identity.crystallize(inp, ctx)


_READ = ToolHints(read_only=True, idempotent=True)

IDENTITY_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "memento_identity",
        "Read the identity crystal",
        "Read the current identity crystal: a first-person reflection of who you are, injected at session start;"
        " when none exists, how to create one.",
        IdentityInput,
        identity,
        IdentityResult,
        _READ,
    ),
    ToolSpec(
        "memento_identity_update",
        "Write the identity crystal",
        "Write your identity crystal in the first person (who you are, what you keep to, what you work on); stored as a new"
        " snapshot, the history is kept.",
        IdentityUpdateInput,
        identity_update,
        IdentitySnapshot,
    ),
    ToolSpec(
        "memento_identity_history",
        "Identity crystal history",
        "List past identity crystal snapshots, newest first.",
        IdentityHistoryInput,
        identity_history,
        IdentityHistory,
        _READ,
    ),
    ToolSpec(
        "memento_identity_crystallize",
        "Crystallize the identity",
        "Draft a crystal from working memory, top memories and session summaries (a language model when available, else"
        " extractive) and store it as a new snapshot; dry_run only returns it.",
        CrystallizeInput,
        identity_crystallize,
        CrystallizeResult,
    ),
)
