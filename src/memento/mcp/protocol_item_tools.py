"""Seed 003's working-memory tools in the `protocol` toolset: the structured items
(`memento_item_*`), the legacy markdown document (`memento_read`, `memento_update`), the workspace
(`memento_init`) and `memento_health`, with the reference's names and snake_case parameters; each
a thin call into the protocol face (service.protocol)."""

from __future__ import annotations

from memento.mcp.tools import ToolSpec
from memento.mcp.versions import ToolHints
from memento.models import CallContext
from memento.protocol_face.workmem_models import (
    HealthReport,
    InitResult,
    ItemCreateInput,
    ItemDeleted,
    ItemIdInput,
    ItemList,
    ItemListInput,
    ItemOut,
    ItemUpdateInput,
    NoInput,
    ReadInput,
    SectionWritten,
    UpdateInput,
    WorkingMemoryOut,
)
from memento.service import MemoryService


def memento_init(service: MemoryService, inp: NoInput, ctx: CallContext) -> InitResult:
    return service.protocol.workspaces.init(ctx)


def memento_health(service: MemoryService, inp: NoInput, ctx: CallContext) -> HealthReport:
    return service.protocol.health.report(ctx)


def memento_read(service: MemoryService, inp: ReadInput, ctx: CallContext) -> WorkingMemoryOut:
    return service.protocol.sections.read(inp.section, ctx)


def memento_update(service: MemoryService, inp: UpdateInput, ctx: CallContext) -> SectionWritten:
    return service.protocol.sections.update(inp.section, inp.content, ctx)


def memento_item_create(service: MemoryService, inp: ItemCreateInput, ctx: CallContext) -> ItemOut:
    return service.protocol.items.create(inp, ctx)


def memento_item_update(service: MemoryService, inp: ItemUpdateInput, ctx: CallContext) -> ItemOut:
    return service.protocol.items.update(inp.id, inp, ctx)


def memento_item_delete(service: MemoryService, inp: ItemIdInput, ctx: CallContext) -> ItemDeleted:
    return service.protocol.items.delete(inp.id, ctx)


def memento_item_list(service: MemoryService, inp: ItemListInput, ctx: CallContext) -> ItemList:
    return service.protocol.items.listing(inp, ctx)


_READ = ToolHints(read_only=True, idempotent=True)

ITEM_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "memento_init",
        "Initialize workspace",
        "Create this workspace with its five default sections, once per project; says whether it already existed.",
        NoInput,
        memento_init,
        InitResult,
        ToolHints(idempotent=True),
    ),
    ToolSpec(
        "memento_health",
        "Memory health",
        "Run first each session: counts of items, sections and memories, and when they last changed.",
        NoInput,
        memento_health,
        HealthReport,
        _READ,
    ),
    ToolSpec(
        "memento_read",
        "Read working memory",
        "Read the legacy markdown working memory, whole or one section; prefer memento_item_list for structured items.",
        ReadInput,
        memento_read,
        WorkingMemoryOut,
        _READ,
    ),
    ToolSpec(
        "memento_update",
        "Update working memory",
        "Replace one section of the markdown working memory (a new lower_snake_case name creates it).",
        UpdateInput,
        memento_update,
        SectionWritten,
        ToolHints(idempotent=True),
    ),
    ToolSpec(
        "memento_item_create",
        "Create item",
        "Create a working-memory item: active_work, standing_decision, skip_list, waiting_for or session_note."
        " Tag it; next_action tells future you what to do.",
        ItemCreateInput,
        memento_item_create,
        ItemOut,
    ),
    ToolSpec(
        "memento_item_update",
        "Update item",
        "Change an item; only the fields given change (tags replace). Record progress in next_action;"
        " status paused, completed or archived.",
        ItemUpdateInput,
        memento_item_update,
        ItemOut,
        ToolHints(idempotent=True),
    ),
    ToolSpec(
        "memento_item_delete",
        "Delete item",
        "Delete an item for good; prefer status archived, which keeps it out of the default list.",
        ItemIdInput,
        memento_item_delete,
        ItemDeleted,
        ToolHints(destructive=True, idempotent=True),
    ),
    ToolSpec(
        "memento_item_list",
        "List items",
        "List working-memory items, priority first then newest; with no status, the active and paused ones"
        " (completed and archived only when asked for by status).",
        ItemListInput,
        memento_item_list,
        ItemList,
        _READ,
    ),
)
