"""EntityService: seed 001's operations (§7.2 tools, §8 REST) over the one engine.

A 001 memory is a fragment: it is stored through MemoryService's write path (redaction, analysis,
embedding, the hash dedupe) and is recalled by 000's `recall` like any other. This service adds
what 001 has beyond 000: the entity graph, near-duplicate merging on write (this face only),
search modes with filters, effective confidence, cluster consolidation and 001's statistics.
Every write is one transaction; every change is announced as a ChangeEvent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, cast

import numpy as np

from .access import refuse_unchangeable
from .errors import Conflict, InvalidArgument, NotFound
from .graph import UNKNOWN_TYPE, Entity, EntityChanges, NewEntity, NewRelation, Relation, SearchMode, effective_confidence
from .graph_inputs import (
    ConsolidateMemoriesInput,
    CreateEntitiesInput,
    CreateRelationInput,
    CreateRelationsInput,
    DeleteEntitiesInput,
    DeleteMemoriesInput,
    DeleteRelationsInput,
    GetEntityGraphInput,
    GetMemoryStatsInput,
    RecallMemoriesInput,
    SearchFilters,
    StoreMemoryInput,
    UpdateEntityInput,
    UpdateMemoryInput,
)
from .graph_results import (
    ConsolidationReport,
    DeletedEntities,
    DeletedMemories,
    DeletedRelations,
    EntitiesOut,
    EntityDetail,
    EntityGraph,
    EntityOut,
    EntityPage,
    GraphNode,
    MemoryHit,
    MemoryHits,
    MemoryOut,
    MemoryPage,
    MemoryStats001,
    MergeCluster,
    RelationOut,
    RelationPage,
    RelationsOut,
    StoredMemory,
    iso,
)
from .lifecycle.merge import Cluster, Merger, merge_into, numbers
from .models import AgentScope, AmendInput, CallContext, ChangeEvent, Fragment, RecordFields, RecordInput
from .outbox import entity_text
from .retrieval.search import SearchRequest
from .storage.protocol import AnalyticsStore, EntityStore, SearchFilter, Store

if TYPE_CHECKING:
    from .service import MemoryService


class GraphCapable(Store, EntityStore, AnalyticsStore, Protocol):
    """What this face needs of the store: every backend provides both (storage.protocol.AppStore)."""


MAX_LISTING = 10_000  # offset + limit of a listing without a query
MAX_BULK_DELETE = 10_000  # memories one delete_memories call may remove by filter
LOW_CONFIDENCE = 0.3  # get_memory_stats: low_confidence_count counts effective confidence below this
_numbers = numbers


class EntityService:
    """The operations of the entity face; `memory` is the engine's MemoryService."""

    def __init__(self, memory: MemoryService) -> None:
        self.memory = memory

    # ------------------------------------------------------------ helpers

    @property
    def _store(self) -> GraphCapable:
        return cast(GraphCapable, self.memory.store)

    def _now(self) -> datetime:
        return self.memory.clock()

    def _half_life(self) -> float:
        return self.memory.settings.confidence_half_life_days

    def _effective(self, f: Fragment, now: datetime) -> float:
        return effective_confidence(f.confidence, f.created_at, f.accessed_at, now, self._half_life())

    def _entity_names(self, scope: AgentScope, fragment_ids: Sequence[str]) -> dict[str, list[str]]:
        """Names of the entities associated with each fragment."""
        if not fragment_ids:
            return {}
        links = self._store.entity_links(scope, fragment_ids=list(fragment_ids))
        entities = {e.id: e.name for e in self._store.get_entities(scope, list({link.entity_id for link in links}))}
        names: dict[str, list[str]] = {}
        for link in links:
            if link.entity_id in entities:
                names.setdefault(link.fragment_id, []).append(entities[link.entity_id])
        return {fid: sorted(v) for fid, v in names.items()}

    def _outs(self, scope: AgentScope, fragments: Sequence[Fragment], now: datetime) -> list[MemoryOut]:
        names = self._entity_names(scope, [f.id for f in fragments])
        return [MemoryOut.of(f, self._effective(f, now), names.get(f.id, [])) for f in fragments]

    def _filter(self, filters: SearchFilters | None, now: datetime, **more: object) -> SearchFilter:
        f = filters or SearchFilters()
        return SearchFilter(
            types=tuple(f.memory_types) if f.memory_types else None,
            tags_all=tuple(f.tags or ()),
            created_after=f.after_date,
            created_before=f.before_date,
            source=f.source,
            entity_id=f.entity_id,
            memory_system=f.memory_system,
            topic=f.topic,
            ttl_tier=f.tier,
            pinned=f.pinned,
            min_confidence=f.min_confidence,
            half_life_days=self._half_life(),
            now=now,
            **more,  # type: ignore[arg-type]
        )

    def _embed_entity(self, name: str, description: str | None) -> np.ndarray | None:
        """The entity's vector if the provider answers within the write wait; else None, and
        `_owe_vectors` hands the entity to the embedding worker once it is committed."""
        return self.memory.embed_within(entity_text(name, description))

    def _owe_vectors(self, entities: Sequence[tuple[Entity, bool]], late: bool = False) -> None:
        """Committed entities stored without a vector (or, `late`, with a stale one): the worker's."""
        for entity, _ in entities:
            if late or not entity.has_embedding:
                self.memory.outbox.entity_written(entity.id, entity.agent_id)

    def _ensure_entities(self, scope: AgentScope, names: Sequence[str], now: datetime) -> list[tuple[Entity, bool]]:
        """The scope's entities of these names, creating the missing ones with type `unknown`."""
        wanted = list(dict.fromkeys(n.strip() for n in names if n.strip()))
        if not wanted:
            return []
        existing = {e.name.lower(): e for e in self._store.entities_named(scope, wanted)}
        news = [
            NewEntity(name=n, entity_type=UNKNOWN_TYPE, embedding=self._embed_entity(n, None)) for n in wanted if n.lower() not in existing
        ]
        made = {e.name.lower(): (e, created) for e, created in self._store.upsert_entities(scope, news, now)} if news else {}
        return [(existing[n.lower()], False) if n.lower() in existing else made[n.lower()] for n in wanted]

    def _announce_entities(self, scope: AgentScope, pairs: Sequence[tuple[Entity, bool]]) -> None:
        self._owe_vectors(pairs)
        created = tuple(e.id for e, new in pairs if new)
        if created:
            self.memory._emit(ChangeEvent("entity_created", scope.agent_id, entity_ids=created))

    # ------------------------------------------------------------ memories

    def store_memory(self, inp: StoreMemoryInput, ctx: CallContext) -> StoredMemory:
        """001 §7.2.1: exact duplicate → the existing memory; near duplicate (raw cosine above
        MEMENTO_NEAR_DUPLICATE_SIMILARITY, same numbers) → merged into the older memory, the new
        text kept in its version trail; else a new memory. Entities named are associated (and
        created as `unknown` when missing)."""
        scope = self.memory._writable(inp.agent_id, ctx, pool=True)
        now = self._now()
        record = RecordFields(
            tags=tuple(self.memory.factory.clean_tags(inp.tags)),
            confidence=inp.confidence,
            context=inp.context,
            metadata=dict(inp.metadata),
        )
        new = self.memory._prepare(
            scope,
            ctx,
            content=inp.content,
            topic=inp.topic or inp.memory_type.value,
            type_=inp.memory_type,
            source=inp.source,
            record=record,
        )
        # 001 §6.1 needs the new text's vector now: waited for at most MEMENTO_EMBED_WRITE_WAIT_MS;
        # late, the memory is stored as new (the worker embeds it; 001's consolidation merges it later).
        new = replace(new, embedding=self.memory.embed_within(new.draft.content))
        near = self._near_duplicate(scope, new.draft.content, new.draft.content_hash, new.embedding)
        kind: str | None = None
        queued: dict[str, object] | None = None
        with self._store.atomic():
            if near is not None:
                fragment, created, kind = self._merge_into(scope, near, new.draft.content, record, inp.source, now), False, "near"
            else:
                fragment, created = self._store.insert(scope, new)
                kind = None if created else "exact"
                queued = self.memory.queued_with(fragment) if created else None
            pairs = self._ensure_entities(scope, inp.entity_names, now)
            if pairs:
                self._store.link_entities(scope, [(e.id, fragment.id, 1.0) for e, _ in pairs], now)
        if created:
            self.memory._emit(ChangeEvent("created", fragment.agent_id, (fragment.id,), (fragment.topic,), details=queued))
        elif kind == "near":
            details = {"changes": ["tags", "confidence", "metadata"], "merged_text": True}
            self.memory._emit(ChangeEvent("amended", fragment.agent_id, (fragment.id,), (fragment.topic,), details=details))
        self._announce_entities(scope, pairs)
        fragment = self._store.get_many(scope, [fragment.id])[0]
        message = {
            "exact": f"duplicate of existing memory {fragment.id}; nothing new stored",
            "near": f"near-duplicate of {fragment.id}: merged into it (tags combined, confidence raised, the new text kept in its versions)",
        }.get(kind or "")
        return StoredMemory(
            memory=self._outs(scope, [fragment], now)[0],
            created=created,
            duplicate=kind,
            entities=[EntityOut.of(e, new_) for e, new_ in pairs],
            message=message,
        )

    def _near_duplicate(self, scope: AgentScope, content: str, digest: str, vector: np.ndarray | None) -> Fragment | None:
        """The visible memory the new text nearly duplicates (001 §6.1), if any; none when the
        same text is stored already (an exact duplicate: the store returns it)."""
        if vector is None:
            return None
        hits = self._store.vector_search(scope, vector, SearchFilter(), 3)
        threshold = self.memory.settings.near_duplicate_similarity
        candidates = [h.id for h in hits if h.score > threshold]
        if not candidates:
            return None
        numbers = _numbers(content)
        found = self._store.get_many(scope, candidates)
        if any(f.content_hash == digest and f.agent_id == scope.agent_id for f in found):
            return None
        for f in found:
            if scope.may_change(f) and _numbers(f.detail or f.content) == numbers and f.session_id is None and f.memory_key is None:
                return f  # differing numbers ("3pm" / "4pm") are different facts
        return None

    def _merge_into(
        self,
        scope: AgentScope,
        old: Fragment,
        text: str,
        record: RecordFields,
        source: str | None,
        now: datetime,
        *,
        note: str = "merged:new",
    ) -> Fragment:
        """Merge a memory's fields into `old` (001 §6.1; lifecycle.merge.merge_into)."""
        return merge_into(self._store, scope, old, text, record, source, now, note=note)

    def recall_memories(self, inp: RecallMemoriesInput, ctx: CallContext) -> MemoryHits:
        """001 §7.2.2: search in the chosen mode with the filters."""
        scope = self.memory._scope(inp.agent_id, ctx)
        entity_id = None
        if inp.entity_name is not None:
            found = self._store.entities_named(scope, [inp.entity_name])
            if not found:
                return MemoryHits(
                    results=[],
                    total=0,
                    limit=inp.limit,
                    offset=inp.offset,
                    search_mode=inp.search_mode.value,
                    coverage=0.0,
                    no_good_match=True,
                )
            entity_id = found[0].id
        filters = SearchFilters(
            memory_types=inp.memory_types,
            tags=inp.tags,
            min_confidence=inp.min_confidence,
            after_date=inp.after_date,
            before_date=inp.before_date,
            entity_id=entity_id,
            source=inp.source,
            memory_system=inp.memory_system,
        )
        return self._search(scope, inp.query, inp.search_mode, filters, inp.limit, inp.offset, inp.depth)

    def search(
        self,
        query: str,
        mode: SearchMode,
        filters: SearchFilters,
        limit: int,
        offset: int,
        ctx: CallContext,
        *,
        agent_id: str | None = None,
    ) -> MemoryHits:
        """GET /api/memories/search."""
        return self._search(self.memory._scope(agent_id, ctx), query, mode, filters, limit, offset, 1)

    def _search(
        self, scope: AgentScope, query: str, mode: SearchMode, filters: SearchFilters, limit: int, offset: int, depth: int
    ) -> MemoryHits:
        if not query.strip():
            raise InvalidArgument("query must not be empty")
        now = self._now()
        if mode is not SearchMode.KEYWORD:  # the vector tier runs: the caller's own writes first
            self.memory.settle_for(scope)
        page = self.memory.searcher.run(
            scope, SearchRequest(query=query, mode=mode, filt=self._filter(filters, now), limit=limit, offset=offset, depth=depth), now
        )
        fragments = [h.fragment for h in page.hits]
        if fragments:
            self._store.record_access([f.id for f in fragments], now)  # 001 §4.3: reinforcement
        outs = self._outs(scope, fragments, now)
        results = [
            MemoryHit(
                memory=out,
                score=round(h.score, 4),
                keyword_score=None if h.keyword_score is None else round(h.keyword_score, 4),
                semantic_score=None if h.semantic_score is None else round(h.semantic_score, 4),
                graph_score=None if h.graph_score is None else round(h.graph_score, 4),
                why=h.why,
            )
            for h, out in zip(page.hits, outs)
        ]
        covered = page.coverage
        return MemoryHits(
            results=results,
            total=page.total,
            limit=limit,
            offset=offset,
            search_mode=mode.value,
            coverage=covered.coverage if covered else None,
            no_good_match=True if covered and covered.no_good_match else None,
        )

    def get_memory(self, memory_id: str, ctx: CallContext, *, agent_id: str | None = None) -> MemoryOut:
        scope = self.memory._scope(agent_id, ctx)
        found = self._store.get_many(scope, [memory_id])
        if not found:
            raise NotFound(f"memory {memory_id!r} not found", missing=(memory_id,))
        now = self._now()
        self._store.record_access([memory_id], now)
        return self._outs(scope, found, now)[0]

    def list_memories(
        self, filters: SearchFilters, limit: int, offset: int, ctx: CallContext, *, agent_id: str | None = None
    ) -> MemoryPage:
        """Newest first, with the total that matches."""
        if offset + limit > MAX_LISTING:
            raise InvalidArgument(f"offset + limit may be at most {MAX_LISTING} for a listing; narrow it with filters")
        scope = self.memory._scope(agent_id, ctx)
        now = self._now()
        filt = self._filter(filters, now)
        rows = self._store.recent(scope, filt, offset + limit)[offset:]
        return MemoryPage(items=self._outs(scope, rows, now), total=self._store.count(scope, filt), limit=limit, offset=offset)

    def update_memory(self, memory_id: str, inp: UpdateMemoryInput, ctx: CallContext, *, agent_id: str | None = None) -> MemoryOut:
        """PUT /api/memories/{id}: an amend (its previous state archived as a version, re-embedded when
        the content changes), and new entity associations."""
        fields = inp.model_dump(exclude_none=True)
        if not fields:
            raise InvalidArgument("nothing to update: give at least one of " + ", ".join(UpdateMemoryInput.model_fields))
        scope = self.memory._writable(agent_id, ctx, pool=True)
        if not self._store.get_many(scope, [memory_id]):
            raise NotFound(f"memory {memory_id!r} not found", missing=(memory_id,))
        now = self._now()
        amendable = {k for k in fields if k != "entity_names"}
        with self._store.atomic():
            if amendable:
                record = RecordInput(confidence=inp.confidence, context=inp.context, metadata=inp.metadata)
                self.memory.amend(
                    AmendInput(
                        id=memory_id,
                        content=inp.content,
                        type=inp.memory_type,
                        tags=inp.tags,
                        importance=inp.importance,
                        record=record if record.model_dump(exclude_none=True) else None,
                        agentId=agent_id,
                    ),
                    ctx,
                    emit=False,
                )
            pairs = self._ensure_entities(scope, inp.entity_names or [], now)
            if pairs:
                self._store.link_entities(scope, [(e.id, memory_id, 1.0) for e, _ in pairs], now)
        fragment = self._store.get_many(scope, [memory_id])[0]
        self.memory._emit(ChangeEvent("amended", fragment.agent_id, (fragment.id,), (fragment.topic,), details={"changes": sorted(fields)}))
        self._announce_entities(scope, pairs)
        return self._outs(scope, [fragment], now)[0]

    def delete_memories(self, inp: DeleteMemoriesInput, ctx: CallContext) -> DeletedMemories:
        """001 §7.2.5: by ids, or every memory matching all the given filters. By filter, pinned
        memories and shared-pool memories the caller may not change are kept (and reported); by id,
        an unknown id is NotFound and nothing is deleted."""
        scope = self.memory._writable(inp.agent_id, ctx, pool=True)
        now = self._now()
        kept: list[str] = []
        if inp.memory_ids:
            ids = list(dict.fromkeys(inp.memory_ids))
            targets = self._store.get_many(scope, ids)
            missing = sorted(set(ids) - {f.id for f in targets})
            if missing:
                raise NotFound(f"memory(s) not found: {', '.join(missing[:5])}; nothing deleted", missing=missing)
            refuse_unchangeable(scope, targets)
        else:
            targets = []
        has_filter = inp.before_date is not None or inp.min_confidence_below is not None or bool(inp.memory_types)
        if has_filter:
            filt = SearchFilter(types=tuple(inp.memory_types) if inp.memory_types else None, created_before=inp.before_date)
            candidates = self._store.recent(scope, filt, MAX_BULK_DELETE + 1)
            if len(candidates) > MAX_BULK_DELETE:
                raise InvalidArgument(f"more than {MAX_BULK_DELETE} memories match; narrow the filters (nothing deleted)")
            if inp.min_confidence_below is not None:
                below = inp.min_confidence_below
                candidates = [f for f in candidates if self._effective(f, now) < below]
            if inp.memory_ids:  # ids and filters: the listed memories that also match
                chosen = {f.id for f in candidates}
                targets = [f for f in targets if f.id in chosen]
            else:
                targets = [f for f in candidates if scope.may_change(f) and not f.pinned]
                kept = [f.id for f in candidates if not scope.may_change(f) or f.pinned]
        deleted = self._store.delete(scope, [f.id for f in targets]) if targets else []
        if deleted:
            self.memory._emit(ChangeEvent("deleted", scope.agent_id, tuple(deleted), tuple({f.topic for f in targets})))
        message = f"{len(kept)} matching memory(s) kept: pinned, or shared-pool memories you may not change" if kept else None
        return DeletedMemories(deleted=deleted, count=len(deleted), kept=kept or None, message=message)

    # ------------------------------------------------------------ entities

    def create_entities(self, inp: CreateEntitiesInput, ctx: CallContext) -> EntitiesOut:
        """001 §7.2.3: create (embedded), or return the existing entity of the name (an `unknown`
        one takes the given type; a given description and metadata update it)."""
        scope = self.memory._writable(inp.agent_id, ctx)
        now = self._now()
        names = [e.name.lower() for e in inp.entities]
        if len(set(names)) != len(names):
            raise InvalidArgument("an entity name is listed twice; nothing created")
        news = [
            NewEntity(
                name=e.name,
                entity_type=e.entity_type,
                description=e.description,
                metadata=dict(e.metadata or {}),
                embedding=self._embed_entity(e.name, e.description),
            )
            for e in inp.entities
        ]
        with self._store.atomic():
            pairs = self._store.upsert_entities(scope, news, now)
        self._announce_entities(scope, pairs)
        self._owe_vectors([(e, c) for (e, c), n in zip(pairs, news) if n.embedding is None and n.description is not None], late=True)
        return EntitiesOut(entities=[EntityOut.of(e, c) for e, c in pairs], created=sum(1 for _, c in pairs if c))

    def _entity(self, scope: AgentScope, entity_id: str) -> Entity:
        found = self._store.get_entities(scope, [entity_id])
        if not found:
            raise NotFound(f"entity {entity_id!r} not found")
        return found[0]

    def get_entity(self, entity_id: str, ctx: CallContext, *, agent_id: str | None = None) -> EntityDetail:
        scope = self.memory._scope(agent_id, ctx)
        entity = self._entity(scope, entity_id)
        relations = self._store.relations_of(scope, [entity.id], 0.0)
        links = self._store.entity_links(scope, entity_ids=[entity.id])
        return EntityDetail(entity=EntityOut.of(entity), relations=[RelationOut.of(r) for r in relations], memory_count=len(links))

    def list_entities(
        self, entity_type: str | None, q: str | None, limit: int, offset: int, ctx: CallContext, *, agent_id: str | None = None
    ) -> EntityPage:
        scope = self.memory._scope(agent_id, ctx)
        rows, total = self._store.list_entities(scope, entity_type=entity_type, name_contains=q, limit=limit, offset=offset)
        return EntityPage(items=[EntityOut.of(e) for e in rows], total=total, limit=limit, offset=offset)

    def update_entity(self, entity_id: str, inp: UpdateEntityInput, ctx: CallContext, *, agent_id: str | None = None) -> EntityOut:
        if not inp.model_dump(exclude_none=True):
            raise InvalidArgument("nothing to update: give at least one of name, entity_type, description, metadata")
        scope = self.memory._writable(agent_id, ctx)
        old = self._entity(scope, entity_id)
        embedding = None
        if inp.name is not None or inp.description is not None:
            embedding = self._embed_entity(inp.name or old.name, inp.description if inp.description is not None else old.description)
        changes = EntityChanges(
            name=inp.name, entity_type=inp.entity_type, description=inp.description, metadata=inp.metadata, embedding=embedding
        )
        entity = self._store.update_entity(scope, entity_id, changes, self._now())
        if embedding is None and (inp.name is not None or inp.description is not None):
            self._owe_vectors([(entity, False)], late=True)  # its stored vector is of the old text
        return EntityOut.of(entity)

    def delete_entities(self, inp: DeleteEntitiesInput, ctx: CallContext) -> DeletedEntities:
        """001 §7.2.6 by name: relations and associations go; memories only with cascade_memories."""
        scope = self.memory._writable(inp.agent_id, ctx, pool=True)
        found = self._store.entities_named(scope, inp.entity_names)
        by_name = {e.name.lower() for e in found}
        missing = [n for n in inp.entity_names if n.lower() not in by_name]
        result = self._delete_entities(scope, found, inp.cascade_memories)
        return result.model_copy(update={"not_found": missing or None})

    def delete_entity_ids(
        self, ids: Sequence[str], cascade_memories: bool, ctx: CallContext, *, agent_id: str | None = None
    ) -> DeletedEntities:
        """DELETE /api/entities/{id}."""
        scope = self.memory._writable(agent_id, ctx, pool=True)
        found = self._store.get_entities(scope, list(ids))
        if not found:
            raise NotFound(f"entity {', '.join(ids)!r} not found")
        return self._delete_entities(scope, found, cascade_memories)

    def _delete_entities(self, scope: AgentScope, entities: Sequence[Entity], cascade_memories: bool) -> DeletedEntities:
        ids = [e.id for e in entities]
        memories: list[Fragment] = []
        with self._store.atomic():
            if cascade_memories and ids:
                linked = list({link.fragment_id for link in self._store.entity_links(scope, entity_ids=ids)})
                memories = self._store.get_many(scope, linked)
                refuse_unchangeable(scope, memories)
            deleted = self._store.delete_entities(scope, ids) if ids else []
            gone = self._store.delete(scope, [f.id for f in memories]) if memories else []
        if deleted:
            self.memory._emit(ChangeEvent("entity_deleted", scope.agent_id, entity_ids=tuple(deleted)))
        if gone:
            self.memory._emit(ChangeEvent("deleted", scope.agent_id, tuple(gone), tuple({f.topic for f in memories})))
        return DeletedEntities(deleted=deleted, deleted_memories=gone)

    def entity_memories(self, entity_id: str, limit: int, offset: int, ctx: CallContext, *, agent_id: str | None = None) -> MemoryPage:
        scope = self.memory._scope(agent_id, ctx)
        self._entity(scope, entity_id)
        links = sorted(self._store.entity_links(scope, entity_ids=[entity_id]), key=lambda link: (-link.relevance, link.fragment_id))
        page = [link.fragment_id for link in links[offset : offset + limit]]
        by_id = {f.id: f for f in self._store.get_many(scope, page)}
        now = self._now()
        return MemoryPage(
            items=self._outs(scope, [by_id[i] for i in page if i in by_id], now), total=len(links), limit=limit, offset=offset
        )

    # ------------------------------------------------------------ relations

    def create_relations(self, inp: CreateRelationsInput, ctx: CallContext) -> RelationsOut:
        """001 §7.2.4: entities looked up by name (missing ones created as `unknown`); a repeated
        (source, target, type) updates the stored relation."""
        scope = self.memory._writable(inp.agent_id, ctx)
        now = self._now()
        with self._store.atomic():
            pairs = self._ensure_entities(scope, [n for r in inp.relations for n in (r.source, r.target)], now)
            ids = {e.name.lower(): e.id for e, _ in pairs}
            news = [
                NewRelation(
                    source_id=ids[r.source.lower()],
                    target_id=ids[r.target.lower()],
                    relation_type=r.relation_type,
                    strength=r.strength,
                    confidence=r.confidence,
                    context=r.context,
                    metadata=dict(getattr(r, "metadata", None) or {}),
                )
                for r in inp.relations
            ]
            stored = self._store.upsert_relations(scope, news, now)
        self._announce_entities(scope, pairs)
        return RelationsOut(
            relations=[RelationOut.of(r, c) for r, c in stored],
            created=sum(1 for _, c in stored if c),
            entities_created=[EntityOut.of(e, True) for e, new in pairs if new],
        )

    def create_relation(self, inp: CreateRelationInput, ctx: CallContext, *, agent_id: str | None = None) -> RelationsOut:
        """POST /api/relations."""
        return self.create_relations(CreateRelationsInput(relations=[inp], agent_id=agent_id), ctx)

    def list_relations(
        self, entity_id: str | None, relation_type: str | None, limit: int, offset: int, ctx: CallContext, *, agent_id: str | None = None
    ) -> RelationPage:
        scope = self.memory._scope(agent_id, ctx)
        rows, total = self._store.list_relations(scope, entity_id=entity_id, relation_type=relation_type, limit=limit, offset=offset)
        return RelationPage(items=[RelationOut.of(r) for r in rows], total=total, limit=limit, offset=offset)

    def delete_relations(self, inp: DeleteRelationsInput, ctx: CallContext) -> DeletedRelations:
        """001 §7.2.7: by (source, target, type) names; unknown ones are reported, not errors."""
        scope = self.memory._writable(inp.agent_id, ctx)
        entities = {
            e.name.lower(): e.id for e in self._store.entities_named(scope, [n for r in inp.relations for n in (r.source, r.target)])
        }
        by_key: dict[tuple[str, str, str], str] = {}
        for ent_id in set(entities.values()):
            for rel in self._store.relations_of(scope, [ent_id], 0.0):
                by_key[(rel.source_id, rel.target_id, rel.relation_type)] = rel.id
        ids: list[str] = []
        missing: list[dict[str, str]] = []
        for r in inp.relations:
            key = (entities.get(r.source.lower(), ""), entities.get(r.target.lower(), ""), r.relation_type)
            if key in by_key:
                ids.append(by_key[key])
            else:
                missing.append({"source": r.source, "target": r.target, "relation_type": r.relation_type})
        deleted = self._store.delete_relations(scope, ids) if ids else []
        return DeletedRelations(deleted=deleted, not_found=missing or None)

    def delete_relation_ids(self, ids: Sequence[str], ctx: CallContext, *, agent_id: str | None = None) -> DeletedRelations:
        """DELETE /api/relations/{id}."""
        scope = self.memory._writable(agent_id, ctx)
        deleted = self._store.delete_relations(scope, list(ids))
        if not deleted:
            raise NotFound(f"relation {', '.join(ids)!r} not found")
        return DeletedRelations(deleted=deleted)

    # ------------------------------------------------------------ graph

    def get_entity_graph(self, inp: GetEntityGraphInput, ctx: CallContext) -> EntityGraph:
        """001 §7.2.8 / §11.2: breadth-first from the named entity."""
        scope = self.memory._scope(inp.agent_id, ctx)
        found = self._store.entities_named(scope, [inp.entity_name])
        if not found:
            raise NotFound(f"entity {inp.entity_name!r} not found")
        return self._subgraph(scope, found[0], inp.depth, inp.min_strength, inp.include_memories)

    def entity_graph_by_id(
        self, entity_id: str, depth: int, min_strength: float, include_memories: bool, ctx: CallContext, *, agent_id: str | None = None
    ) -> EntityGraph:
        """GET /api/entities/{id}/graph."""
        scope = self.memory._scope(agent_id, ctx)
        return self._subgraph(scope, self._entity(scope, entity_id), depth, min_strength, include_memories)

    def _subgraph(self, scope: AgentScope, center: Entity, depth: int, min_strength: float, include_memories: bool) -> EntityGraph:
        depth_of = {center.id: 0}
        score_of = {center.id: 1.0}
        edges: dict[str, Relation] = {}
        frontier = [center.id]
        for level in range(1, depth + 1):
            if not frontier:
                break
            nxt: list[str] = []
            for rel in self._store.relations_of(scope, frontier, min_strength):
                edges[rel.id] = rel
                for here, there in ((rel.source_id, rel.target_id), (rel.target_id, rel.source_id)):
                    if here in score_of and depth_of[here] == level - 1:
                        path = score_of[here] * rel.strength * rel.confidence
                        if there not in depth_of:
                            depth_of[there] = level
                            nxt.append(there)
                        if depth_of[there] == level and path > score_of.get(there, -1.0):
                            score_of[there] = path
            frontier = nxt
        # Edges between visited nodes only (an edge out of the last level leads outside the graph).
        kept = [r for r in edges.values() if r.source_id in depth_of and r.target_id in depth_of]
        entities = {e.id: e for e in self._store.get_entities(scope, list(depth_of))}
        memories: dict[str, list[MemoryOut]] = {}
        if include_memories:
            now = self._now()
            links = self._store.entity_links(scope, entity_ids=list(entities))
            by_id = {f.id: f for f in self._store.get_many(scope, list({link.fragment_id for link in links}))}
            outs = {o.id: o for o in self._outs(scope, list(by_id.values()), now)}
            for link in sorted(links, key=lambda k: -k.relevance):
                if link.fragment_id in outs:
                    memories.setdefault(link.entity_id, []).append(outs[link.fragment_id])
        nodes = [
            GraphNode(
                entity=EntityOut.of(entities[i]),
                depth=depth_of[i],
                score=round(score_of[i], 4),
                memories=memories.get(i, []) if include_memories else None,
            )
            for i in sorted(entities, key=lambda i: (depth_of[i], -score_of[i], entities[i].name))
        ]
        ranked = sorted(kept, key=lambda r: (-(r.strength * r.confidence), r.id))
        return EntityGraph(center=center.id, depth=depth, nodes=nodes, edges=[RelationOut.of(r) for r in ranked])

    # ------------------------------------------------------------ consolidation and statistics

    def consolidate_memories(self, inp: ConsolidateMemoriesInput, ctx: CallContext) -> ConsolidationReport:
        """001 §7.2.9 / §6.2 (lifecycle/merge.py, shared with the pipeline's `merged` stage):
        clusters of memories of one type whose calibrated similarity to the cluster's primary (the
        most confident, then the oldest) exceeds the threshold, on the stored vectors; each absorbed
        memory's text goes to the primary's version trail, its tags, confidence, metadata and entity
        associations to the primary, then it is deleted. Pinned and anchored memories are never
        absorbed. dry_run reports the clusters and changes nothing."""
        scope = self.memory._writable(inp.agent_id, ctx, pool=True)
        threshold = inp.similarity_threshold if inp.similarity_threshold is not None else self.memory.settings.consolidation_similarity
        now = self._now()
        merger = self.merger
        self.memory._settle_before_maintenance()  # clusters read stored vectors: this process's writes first
        clusters = merger.clusters(scope, threshold)
        report = [
            MergeCluster(primary_id=c.primary.id, absorbed_ids=c.absorbed_ids, min_similarity=round(min(s for _, s in c.members), 4))
            for c in clusters
        ]
        merged = deleted = 0
        if not inp.dry_run:
            for cluster in clusters:
                gone = merger.merge(scope, cluster, now)
                merged += len(cluster.members)
                deleted += len(gone)
            details = {"merged": merged, "deleted": deleted}
            self.memory._emit(ChangeEvent("consolidated", scope.agent_id, details=details))
        return ConsolidationReport(
            clusters_found=len(clusters),
            memories_merged=merged,
            memories_deleted=deleted,
            dry_run=inp.dry_run,
            similarity_threshold=threshold,
            clusters=report,
        )

    @property
    def merger(self) -> Merger:
        """001 §6.2's merging over this engine's store (lifecycle/merge.py)."""
        return Merger(self._store, lambda: self.memory.searcher.baseline)

    def absorb_memory(self, agent_id: str | None, absorbed_id: str, primary_id: str, ctx: CallContext) -> Fragment:
        """001 §6.2's merge of one pair (the evaluator's merge proposal, docs/lifecycle.md): as in
        `consolidate_memories` (the same Merger), the absorbed memory's text and version trail go to
        the primary's version trail, its tags, confidence, metadata and entity associations to the
        primary, then it is deleted, in one transaction. A pinned, anchored or keyed memory is never
        absorbed (InvalidArgument)."""
        scope = self.memory._writable(agent_id, ctx, pool=True)
        now = self._now()
        found = {f.id: f for f in self._store.get_many(scope, [absorbed_id, primary_id]) if scope.may_change(f)}
        for wanted in (absorbed_id, primary_id):
            if wanted not in found or absorbed_id == primary_id:
                raise NotFound(f"memory {wanted!r} not found (or the same as the other); nothing merged", missing=(wanted,))
        absorbed, primary = found[absorbed_id], found[primary_id]
        if absorbed.pinned or absorbed.is_anchor or absorbed.memory_key is not None or absorbed.session_id is not None:
            raise InvalidArgument(f"memory {absorbed_id!r} is pinned, anchored, keyed or working memory: never absorbed; nothing merged")
        if not self.merger.merge(scope, Cluster(primary, ((absorbed, 1.0),)), now):
            raise Conflict(f"memory {absorbed_id!r} changed while it was being merged; nothing merged")
        self.memory._emit(ChangeEvent("consolidated", scope.agent_id, details={"merged": 1, "deleted": 1}))
        merged = self._store.get_many(scope, [primary_id])
        if not merged:
            raise NotFound(f"memory {primary_id!r} is gone")
        return merged[0]

    def get_memory_stats(self, inp: GetMemoryStatsInput, ctx: CallContext) -> MemoryStats001:
        """001 §7.2.10, computed in SQL (average_confidence is the mean effective confidence; the
        low-confidence count is below LOW_CONFIDENCE)."""
        scope = self.memory._scope(inp.agent_id, ctx)
        overview = self._store.memory_overview(scope, self._now(), self._half_life(), LOW_CONFIDENCE)
        by_type = {k: v for k, v in self._store.type_counts(scope).items() if v}
        eff = overview.average_effective_confidence
        return MemoryStats001(
            total_memories=overview.total_memories,
            total_entities=overview.total_entities,
            total_relations=overview.total_relations,
            memories_by_type=by_type,
            average_confidence=None if eff is None else round(eff, 4),
            oldest_memory=iso(overview.oldest_memory),
            newest_memory=iso(overview.newest_memory),
            low_confidence_count=overview.low_confidence_count,
        )


def with_agent(inp: StoreMemoryInput, agent_id: str | None) -> StoreMemoryInput:
    """The input with agent_id set (REST passes the query's agent)."""
    return inp if agent_id is None else inp.model_copy(update={"agent_id": agent_id})


__all__ = ["EntityService", "with_agent", "replace"]
