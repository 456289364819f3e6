"""What the dashboard (memento.ui) asks of /api beyond seed 001's routes: a memory's whole page
(its record, versions, links, entities and access counts — read without counting as an access),
pin and unpin (004 §5.1, as the MCP tools do), bulk forget, restore, pin and unpin of a
selection in one transaction (all or nothing)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from ..access import call_scope
from ..errors import NotFound
from ..fields import FragmentId
from ..models import CallContext, ForgetInput, ForgetMode, PinInput, RelationType
from ..results import FragmentView, PinResult
from ..service import MemoryService
from ..storage.protocol import AppStore as Store
from .memories import MemoryId
from .routing import Ctx, json_response, run

if TYPE_CHECKING:
    from ..app import App

LINKS_SHOWN = 200
VERSIONS_SHOWN = 100


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LinkOut(Out):
    direction: Literal["out", "in"]
    relation: str
    other_id: str
    other_type: str
    other_topic: str
    other_content: str
    created_at: str


class EntityRef(Out):
    id: str
    name: str
    entity_type: str
    relevance: float


class MemoryDetails(Out):
    """One memory with everything the dashboard's memory page shows."""

    memory: dict[str, Any] = Field(description="The memory as every face shows it (camelCase, with tier, pin and agent).")
    versions: list[dict[str, Any]] = Field(description="Its earlier states, oldest first (each amend keeps one).")
    links: list[LinkOut]
    entities: list[EntityRef]
    feedback: dict[str, int] = Field(description="Feedback events on it, by kind.")


class BulkBody(BaseModel):
    """A selection of memories and what to do with all of them."""

    model_config = ConfigDict(extra="forbid")

    ids: Annotated[list[FragmentId], Field(min_length=1, max_length=100, description="Memory ids (1-100).")]
    action: Literal["forget", "restore", "pin", "unpin"] = Field(description="forget (soft: restorable), restore, pin or unpin.")


class BulkResult(Out):
    action: str
    ids: list[str] = Field(description="The memories the action changed.")
    count: int


def _plain(value: object) -> object:
    return value.isoformat() if isinstance(value, datetime) else value


def details(store: Store, memory_id: str, ctx: CallContext) -> MemoryDetails:
    """The memory page of `memory_id` in the caller's namespace (404 when it is not there)."""
    scope = call_scope(None, ctx)
    store.flush_access()
    found = store.get_many(scope, [memory_id])
    if not found:
        raise NotFound(f"memory {memory_id!r} not found", missing=(memory_id,))
    fragment = found[0]
    versions = [{k: _plain(v) for k, v in row.items()} for row in store.versions(scope, memory_id)[-VERSIONS_SHOWN:]]
    links = [
        LinkOut(
            direction="out" if link.from_id == memory_id else "in",
            relation=link.relation_type.value,
            other_id=other.id,
            other_type=other.type.value,
            other_topic=other.topic,
            other_content=other.content,
            created_at=link.created_at.isoformat(),
        )
        for link, other in store.neighbours(scope, [memory_id], list(RelationType), LINKS_SHOWN)
        if other.id != memory_id
    ]
    associations = store.entity_links(scope, fragment_ids=[memory_id])
    relevance = {a.entity_id: a.relevance for a in associations}
    entities = [
        EntityRef(id=e.id, name=e.name, entity_type=e.entity_type, relevance=round(relevance.get(e.id, 0.0), 4))
        for e in store.get_entities(scope, list(relevance))
    ]
    tally = store.feedback_tallies(scope, [memory_id]).get(memory_id)
    return MemoryDetails(
        memory=FragmentView.of(fragment).dump(),
        versions=versions,
        links=links,
        entities=entities,
        feedback=dict(sorted(tally.counts.items())) if tally else {},
    )


def bulk(store: Store, memory: MemoryService, body: BulkBody, ctx: CallContext) -> BulkResult:
    """One action on every selected memory, in one transaction: a refusal of any leaves all as they were."""
    ids = list(dict.fromkeys(body.ids))
    if body.action == "restore":
        back = memory.restore_many(ids, ctx)
        return BulkResult(action=body.action, ids=back, count=len(back))
    changed: list[str] = []
    with memory.held_events(), store.atomic():  # the live events go out once the whole selection committed
        seen = {f.id for f in store.get_many(call_scope(None, ctx), ids)}
        missing = [i for i in ids if i not in seen]
        if missing:
            raise NotFound(
                f"memory {missing[0]!r} not found" + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""), missing=missing
            )
        for memory_id in ids:
            if body.action == "forget":
                changed += memory.forget(ForgetInput(id=memory_id, mode=ForgetMode.SOFT, force=True), ctx).deleted
            else:
                pin = memory.pin if body.action == "pin" else memory.unpin
                result = pin(PinInput(id=memory_id), ctx)
                if result.changed:
                    changed.append(result.id)
    return BulkResult(action=body.action, ids=changed, count=len(changed))


def router(app: App) -> APIRouter:
    store: Store = app.store
    memory: MemoryService = app.service
    api = APIRouter(prefix="/memories", tags=["memories"])

    @api.post("/bulk", response_model=BulkResult, summary="Forget, restore, pin or unpin a selection (one transaction)")
    async def bulk_action(body: BulkBody, ctx: Ctx) -> object:
        return json_response(await run(bulk, store, memory, body, ctx))

    @api.get("/{memory_id}/details", response_model=MemoryDetails, summary="A memory with its versions, links, entities and feedback")
    async def memory_details(memory_id: MemoryId, ctx: Ctx) -> object:
        return json_response(await run(details, store, memory_id, ctx))

    @api.post("/{memory_id}/pin", response_model=PinResult, summary="Pin a memory (it never expires, decays or merges)")
    async def pin(memory_id: MemoryId, ctx: Ctx) -> object:
        return json_response(await run(memory.pin, PinInput(id=memory_id), ctx))

    @api.delete("/{memory_id}/pin", response_model=PinResult, summary="Unpin a memory")
    async def unpin(memory_id: MemoryId, ctx: Ctx) -> object:
        return json_response(await run(memory.unpin, PinInput(id=memory_id), ctx))

    return api
