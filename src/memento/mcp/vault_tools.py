"""Seed 002's three tools (§3.2), the `vault` toolset: names, descriptions, input and output
schemas as the seed writes them, each a thin call into VaultService over the one engine. They
always declare their outputSchema and return structuredContent (from 2025-06-18)."""

from __future__ import annotations

from memento.mcp.tools import ToolSpec
from memento.mcp.versions import ToolHints
from memento.models import CallContext
from memento.service import MemoryService
from memento.vault_models import CommitMemoryInput, CommitResult, PruneMemoryInput, PruneResult, SearchMemoriesInput, SearchResult


def commit_memory(service: MemoryService, inp: CommitMemoryInput, ctx: CallContext) -> CommitResult:
    return service.vault.commit(inp, ctx)


def search_memories(service: MemoryService, inp: SearchMemoriesInput, ctx: CallContext) -> SearchResult:
    return service.vault.search(inp, ctx)


def prune_memory(service: MemoryService, inp: PruneMemoryInput, ctx: CallContext) -> PruneResult:
    return service.vault.prune(inp, ctx)


VAULT_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "commit_memory",
        "Commit memory",
        "Store a memory entry in the session (volatile) or vault (persistent) scope. Upserts on key collision.",
        CommitMemoryInput,
        commit_memory,
        CommitResult,
        ToolHints(idempotent=True),
        structured=True,
    ),
    ToolSpec(
        "search_memories",
        "Search memories",
        "Search memories by text query, tags, or both. Returns ranked results. Semantic ranking used if embeddings are present"
        " and a query_embedding is provided.",
        SearchMemoriesInput,
        search_memories,
        SearchResult,
        ToolHints(read_only=True),
        structured=True,
    ),
    ToolSpec(
        "prune_memory",
        "Prune memory",
        "Delete memory entries. Can target a specific key, or bulk-delete by age or scope.",
        PruneMemoryInput,
        prune_memory,
        PruneResult,
        ToolHints(destructive=True, idempotent=True),
        structured=True,
    ),
)
