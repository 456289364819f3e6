"""Seed 003's memory tools (the `protocol` toolset): memento_remember and its alias memento_store,
memento_recall, memento_memory_delete and memento_memory_graph, thin calls into the face's
Memories (protocol_face/memories.py) with the reference's snake_case parameters."""

from __future__ import annotations

from memento.mcp.tools import ToolSpec
from memento.mcp.versions import ToolHints
from memento.models import CallContext
from memento.protocol_face.memory_models import (
    DeletedMemory,
    DeleteMemoryInput,
    MemoryGraph,
    MemoryGraphInput,
    MemoryList,
    RecallMemoriesInput,
    StoredMemory,
    StoreMemoryInput,
)
from memento.service import MemoryService

STORE = "Store a memory with tags, an optional expiry and linkages. Write it so a future agent knows what to do."


def remember(service: MemoryService, inp: StoreMemoryInput, ctx: CallContext) -> StoredMemory:
    return service.protocol.memories.store(inp, ctx)


def recall(service: MemoryService, inp: RecallMemoriesInput, ctx: CallContext) -> MemoryList:
    return service.protocol.memories.recall(inp, ctx)


def delete(service: MemoryService, inp: DeleteMemoryInput, ctx: CallContext) -> DeletedMemory:
    return service.protocol.memories.delete(inp.id, ctx)


def graph(service: MemoryService, inp: MemoryGraphInput, ctx: CallContext) -> MemoryGraph:
    return service.protocol.memories.graph(inp, ctx)


MEMORY_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("memento_remember", "Remember", STORE, StoreMemoryInput, remember, StoredMemory, ToolHints(idempotent=True)),
    ToolSpec("memento_store", "Store memory", STORE, StoreMemoryInput, remember, StoredMemory, ToolHints(idempotent=True)),
    ToolSpec(
        "memento_recall",
        "Recall memories",
        "Search your memories by words or meaning (and tags, type), best first. Check before working on a topic.",
        RecallMemoriesInput,
        recall,
        MemoryList,
        ToolHints(read_only=True),
    ),
    ToolSpec(
        "memento_memory_delete",
        "Delete memory",
        "Delete a wrong or unwanted memory (soft: restorable for a while).",
        DeleteMemoryInput,
        delete,
        DeletedMemory,
        ToolHints(destructive=True, idempotent=True),
    ),
    ToolSpec(
        "memento_memory_graph",
        "Memory graph",
        "Follow a memory's linkages both ways: memory, item and file nodes, labelled edges.",
        MemoryGraphInput,
        graph,
        MemoryGraph,
        ToolHints(read_only=True, idempotent=True),
    ),
)
