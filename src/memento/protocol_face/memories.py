"""Seed 003's memories over the one engine.

A 003 memory is a Memento fragment (docs/record.md), written through MemoryService's write path
(redaction, the duplicate check, embedding, statistics) in the caller's namespace: recalled by
000's `recall` and erased, exported and isolated like any other. Its 003 type is its kind
(fact, decision, observation; an instruction is a `procedure`), `expires` its `expires_at`, its
tags the record's tags and its first tag its topic. memento_recall ranks with 000's engine (the
cascade and whichever score profile MEMENTO_SCORE_PROFILE picks) over the caller's own memories;
the face never reaches the shared pool's. memento_memory_delete is a soft forget (004's
default): restorable with `restore` for MEMENTO_FORGET_RETENTION_DAYS; `forget mode=hard`
erases. docs/protocol.md "Memories".
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..errors import InvalidArgument, NotFound
from ..models import AgentScope, AmendInput, CallContext, ChangeEvent, ForgetInput, Fragment, RecallInput, RecordFields, RecordInput
from ..retrieval.recall import recall_filter
from .linkages import Linkages, new_linkages
from .memory_models import (
    KIND_OF,
    DeletedMemory,
    LinkageOut,
    MemoryGraph,
    MemoryGraphInput,
    MemoryList,
    MemoryOut,
    RecallMemoriesInput,
    StoredMemory,
    StoreMemoryInput,
    UpdateMemoryInput,
    parse_expires,
    protocol_type,
)

if TYPE_CHECKING:
    from ..results import RecallItem
    from . import ProtocolFace

DEFAULT_TOPIC = "general"  # the topic of a memory stored without tags
RECALL_BUDGET = 100_000  # tokens: the face's `limit` bounds a recall, not 000's budget
MAX_LISTING = 100


def zulu(value: datetime) -> str:
    """A timestamp as the reference writes it: UTC ISO 8601 with `Z`."""
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _zulu_text(value: str | None) -> str | None:
    return zulu(datetime.fromisoformat(value)) if value else None


def future(value: str | None) -> datetime | None:
    """`expires` as a time, refused when it is not in the future (stores hide rows by the wall clock)."""
    if value is None:
        return None
    when = parse_expires(value)
    if when <= datetime.now(UTC):
        raise InvalidArgument(f"expires {value!r} is not in the future; nothing stored")
    return when


class Memories:
    """memento_store / memento_remember, memento_recall, memento_memory_delete and the /v1/memories routes."""

    def __init__(self, face: ProtocolFace) -> None:
        self.face = face
        self.service = face.service
        self.linkages = Linkages(face.service)

    # ------------------------------------------------------------ writing

    def store(self, inp: StoreMemoryInput, ctx: CallContext) -> StoredMemory:
        """Store one memory with its linkages, all in one transaction (or nothing)."""
        scope = self.face.write_scope(ctx)
        expires = future(inp.expires)
        service = self.service
        tags = service.factory.clean_tags(inp.tags or ())
        linkages = new_linkages(inp.linkages)
        self.linkages.check(scope, linkages)
        new = service._prepare(  # redacted and analysed outside the transaction (embedded after it)
            scope,
            ctx,
            content=inp.content,
            topic=tags[0] if tags else DEFAULT_TOPIC,
            type_=KIND_OF[inp.type],
            record=RecordFields(tags=tags, expires_at=expires),
        )
        with service.store.atomic():
            fragment, created = service.store.insert(scope, new)
            queued = service.queued_with(fragment) if created else None
            if linkages:
                self.linkages.attach(scope, fragment, linkages, service.clock())
        if created:
            service._emit(ChangeEvent("created", fragment.agent_id, (fragment.id,), (fragment.topic,), details=queued))
        elif linkages:
            service._emit(ChangeEvent("amended", fragment.agent_id, (fragment.id,), (fragment.topic,), details={"linkages": True}))
        message = None if created else f"the same content is stored already as {fragment.id}; nothing new stored"
        if not created and linkages:
            message = f"the same content is stored already as {fragment.id}; the linkages were added to it"
        return StoredMemory(id=fragment.id, created=created, memory=self._out(scope, fragment), message=message)

    def update(self, memory_id: str, inp: UpdateMemoryInput, ctx: CallContext) -> MemoryOut:
        """Change the fields given (000's amend: the old state becomes a version) and add the
        linkages given, in one transaction."""
        scope = self.face.write_scope(ctx)
        memory = self._own(scope, memory_id)
        expires = future(inp.expires)
        linkages = new_linkages(inp.linkages)
        changes = {"content": inp.content, "type": inp.type, "tags": inp.tags, "expires": inp.expires}
        if all(v is None for v in changes.values()) and not linkages:
            raise InvalidArgument("nothing to update: give at least one of content, type, tags, expires, linkages")
        self.linkages.check(scope, linkages)
        service = self.service
        with service.store.atomic():
            if any(v is not None for v in changes.values()):
                amend = AmendInput(
                    id=memory.id,
                    content=inp.content,
                    type=KIND_OF[inp.type] if inp.type else None,
                    tags=inp.tags,
                    record=RecordInput(expiresAt=expires) if expires else None,
                )
                service.amend(amend, ctx, emit=False)
            if linkages:
                self.linkages.attach(scope, memory, linkages, service.clock())
        changed = self._own(scope, memory_id)
        service._emit(ChangeEvent("amended", changed.agent_id, (changed.id,), tuple({memory.topic, changed.topic})))
        return self._out(scope, changed)

    def delete(self, memory_id: str, ctx: CallContext) -> DeletedMemory:
        """A soft forget of one of the caller's memories (restorable); another's is not found."""
        scope = self.face.write_scope(ctx)
        self._own(scope, memory_id)
        result = self.service.forget(ForgetInput(id=memory_id, force=True), ctx)
        return DeletedMemory(id=memory_id, deleted=bool(result.deleted), mode=result.mode, restorable_until=result.restorable_until)

    # ------------------------------------------------------------ reading

    def recall(self, inp: RecallMemoriesInput, ctx: CallContext) -> MemoryList:
        """The caller's memories matching the query (and any of the tags, and the type), ranked by 000's engine."""
        scope = self.face.read_scope(ctx)
        return self._recalled(scope, inp.query, inp.tags or [], inp.type, inp.limit)

    def listing(self, query: str | None, tags: list[str], type_: str | None, limit: int, ctx: CallContext) -> MemoryList:
        """GET /v1/memories: recalled for a query, otherwise listed (newest first, or by 000's
        prior past its activation threshold) with any of the tags and the type given."""
        return self._recalled(self.face.read_scope(ctx), query, tags, type_, min(limit, MAX_LISTING))

    def search(self, message: str, ctx: CallContext, limit: int) -> list[MemoryOut]:
        """The caller's memories that 000's recall finds for `message`, best first, with scores (the context call)."""
        return self._recalled(self.face.read_scope(ctx), message, [], None, limit).memories

    def get(self, memory_id: str, ctx: CallContext) -> MemoryOut:
        scope = self.face.read_scope(ctx)
        return self._out(scope, self._own(scope, memory_id))

    def graph(self, inp: MemoryGraphInput, ctx: CallContext) -> MemoryGraph:
        """The linkages around one of the caller's memories, breadth first."""
        scope = self.face.read_scope(ctx)
        return self.linkages.graph(scope, self._own(scope, inp.id), inp)

    # ------------------------------------------------------------ helpers

    def _own(self, scope: AgentScope, memory_id: str) -> Fragment:
        """A live memory of the caller's own namespace (the shared pool's are not this face's)."""
        found = self.service.store.get_many(scope, [memory_id])
        if not found or found[0].agent_id != scope.agent_id:
            raise NotFound(f"memory {memory_id!r} not found", missing=(memory_id,))
        return found[0]

    def _recalled(self, scope: AgentScope, query: str | None, tags: list[str], type_: str | None, limit: int) -> MemoryList:
        """000's recall over the scope's own permanent memories: ranked for a query (with its
        coverage), listed without."""
        service = self.service
        started = time.perf_counter()
        try:
            text = query.strip() if query and query.strip() else None
            inp = RecallInput(
                text=text,
                tagsAny=tags or None,
                type=KIND_OF[type_] if type_ else None,
                limit=limit,
                includeLinks=False,
                tokenBudget=RECALL_BUDGET,
            )
            filt = replace(recall_filter(inp, None, service.settings.confidence_half_life_days), owner=scope.agent_id)
            result = service.recaller.run(scope, inp, filt, None, service.clock(), embed=True, settle=lambda: service.settle_for(scope))
        finally:
            service.observers.recall(time.perf_counter() - started)
        items = result.fragments
        linkages = self.linkages.of(scope, [i.id for i in items])
        found = [self._recalled_out(i, linkages.get(i.id, [])) for i in items]
        return MemoryList(memories=found, count=len(found), coverage=result.coverage, no_good_match=result.no_good_match)

    @staticmethod
    def _recalled_out(item: RecallItem, linkages: list[LinkageOut]) -> MemoryOut:
        return MemoryOut(
            id=item.id,
            content=item.detail or item.content,
            type=protocol_type(item.type),
            tags=list(item.tags),
            created_at=_zulu_text(item.created_at) or "",
            expires_at=_zulu_text(item.expires_at),
            linkages=linkages,
            score=item.score,
        )

    def _out(self, scope: AgentScope, f: Fragment) -> MemoryOut:
        return MemoryOut(
            id=f.id,
            content=f.detail or f.content,
            type=protocol_type(f.type),
            tags=list(f.tags),
            created_at=zulu(f.created_at),
            expires_at=zulu(f.expires_at) if f.expires_at else None,
            linkages=self.linkages.of(scope, [f.id]).get(f.id, []),
        )


__all__ = ["Memories"]
