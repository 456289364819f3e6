"""Seed 001's face through EntityService on both backends, with a settable clock: memory CRUD and
entity association (§10.1), confidence decay, reinforcement and its cap (§10.3), entities, relations
and the BFS subgraph (§10.4), consolidation (§10.5), statistics (§7.2.10), and that a 001 memory is
one record with 000's (recalled by `recall`). The semantic behaviours (near duplicates, meaning
search) need the real model: tests/test_entity_mcp.py."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import Clock
from pydantic import ValidationError

from memento.errors import InvalidArgument, NotFound
from memento.graph_inputs import (
    ConsolidateMemoriesInput,
    CreateEntitiesInput,
    CreateRelationsInput,
    DeleteEntitiesInput,
    DeleteMemoriesInput,
    DeleteRelationsInput,
    GetEntityGraphInput,
    GetMemoryStatsInput,
    RecallMemoriesInput,
    SearchFilters,
    StoreMemoryInput,
    UpdateMemoryInput,
)
from memento.graph_results import StoredMemory
from memento.lifecycle.merge import Cluster
from memento.models import AgentScope, AmendInput, CallContext, ConsolidateInput, PinInput, RecallInput, RecordInput, RememberInput
from memento.service import MemoryService

pytestmark = pytest.mark.backends("sqlite", "postgres")


def store(service: MemoryService, ctx: CallContext, content: str, **kw: Any) -> StoredMemory:
    return service.entities.store_memory(StoreMemoryInput.model_validate({"content": content, **kw}), ctx)


def relate(service: MemoryService, ctx: CallContext, *triples: tuple[str, str, str], strength: float = 0.5) -> None:
    rels = [{"source": s, "target": t, "relation_type": r, "strength": strength} for s, t, r in triples]
    service.entities.create_relations(CreateRelationsInput.model_validate({"relations": rels}), ctx)


def graph_names(service: MemoryService, ctx: CallContext, name: str, depth: int, **kw: Any) -> set[str]:
    g = service.entities.get_entity_graph(GetEntityGraphInput.model_validate({"entity_name": name, "depth": depth, **kw}), ctx)
    return {n.entity.name for n in g.nodes}


# ---------------------------------------------------------------- 10.1 memory CRUD


def test_store_basic_memory(service: MemoryService, ctx: CallContext) -> None:
    out = store(service, ctx, "User prefers TypeScript", memory_type="preference")
    assert out.created is True and out.duplicate is None
    m = out.memory
    assert m.id and m.memory_type == "preference" and m.confidence == 1.0 and m.effective_confidence == 1.0
    assert m.has_embedding is True
    # one record: 000's recall finds it
    assert m.id in {f.id for f in service.recall(RecallInput(text="TypeScript"), ctx).fragments}


def test_store_with_entities_auto_creates_them_and_links(service: MemoryService, ctx: CallContext) -> None:
    out = store(service, ctx, "Alice manages the frontend team", entity_names=["Alice", "Frontend Team"])
    assert {e.name for e in out.entities} == {"Alice", "Frontend Team"}
    assert all(e.created and e.entity_type == "unknown" for e in out.entities)
    assert sorted(out.memory.entities or []) == ["Alice", "Frontend Team"]
    again = store(service, ctx, "Alice reviews every release", entity_names=["alice"])  # same entity, any case
    assert [e.created for e in again.entities] == [False]
    page = service.entities.entity_memories(out.entities[0].id, 10, 0, ctx)
    assert page.total == 2


def test_exact_duplicate_returns_the_existing_memory(service: MemoryService, ctx: CallContext) -> None:
    first = store(service, ctx, "User prefers dark mode")
    second = store(service, ctx, "User prefers dark mode")
    assert second.created is False and second.duplicate == "exact" and second.memory.id == first.memory.id
    assert service.entities.get_memory_stats(GetMemoryStatsInput(), ctx).total_memories == 1


def test_update_memory_keeps_a_version_and_reembeds(service: MemoryService, ctx: CallContext) -> None:
    m = store(service, ctx, "Deploy uses the blue pipeline", memory_type="procedure").memory
    updated = service.entities.update_memory(m.id, UpdateMemoryInput(content="Deploy uses the green pipeline", confidence=0.8), ctx)
    assert updated.content == "Deploy uses the green pipeline" and updated.confidence == 0.8
    assert service.settle() and service.entities.get_memory(m.id, ctx).has_embedding  # the new text's vector, by the worker
    versions = service.store.versions(service._scope(None, ctx), m.id)
    assert [v["content"] for v in versions] == ["Deploy uses the blue pipeline"]
    assert versions[0]["confidence"] == 1.0
    with pytest.raises(InvalidArgument):
        service.entities.update_memory(m.id, UpdateMemoryInput(), ctx)
    with pytest.raises(NotFound):
        service.entities.update_memory("frag-0000000000000000", UpdateMemoryInput(confidence=0.5), ctx)


def test_delete_memory_cascades_links_and_keeps_entities(service: MemoryService, ctx: CallContext) -> None:
    out = store(service, ctx, "Bob owns the billing service", entity_names=["Bob"])
    deleted = service.entities.delete_memories(DeleteMemoriesInput(memory_ids=[out.memory.id]), ctx)
    assert deleted.deleted == [out.memory.id]
    entity = out.entities[0]
    detail = service.entities.get_entity(entity.id, ctx)
    assert detail.entity.name == "Bob" and detail.memory_count == 0


def test_delete_memories_by_filters(service: MemoryService, ctx: CallContext, clock: Clock) -> None:
    old = store(service, ctx, "An old observation about caching").memory
    clock.now += timedelta(days=10)
    newer = store(service, ctx, "A decision to use Redis", memory_type="decision").memory
    pinned_out = store(service, ctx, "A pinned old-style fact", memory_type="fact")
    service.amend(AmendInput(id=pinned_out.memory.id, record=RecordInput(pinned=True)), ctx)
    with pytest.raises(ValidationError):
        DeleteMemoriesInput()
    cut = clock.now - timedelta(days=5)
    gone = service.entities.delete_memories(DeleteMemoriesInput(before_date=cut), ctx)
    assert gone.deleted == [old.id]
    gone = service.entities.delete_memories(DeleteMemoriesInput(memory_types=["decision", "fact"]), ctx)
    assert gone.deleted == [newer.id] and gone.kept == [pinned_out.memory.id]
    with pytest.raises(NotFound):
        service.entities.delete_memories(DeleteMemoriesInput(memory_ids=["frag-ffffffffffffffff"]), ctx)


# ---------------------------------------------------------------- 10.3 confidence


def test_initial_confidence_and_decay_at_30_and_60_days(service: MemoryService, ctx: CallContext, clock: Clock) -> None:
    m = store(service, ctx, "Quarterly report is due in March").memory
    assert m.confidence == 1.0
    clock.now += timedelta(days=30)
    got = service.entities.list_memories(SearchFilters(), 10, 0, ctx).items[0]
    assert got.effective_confidence == pytest.approx(0.5, abs=0.01) and got.confidence == 1.0
    clock.now += timedelta(days=30)
    got = service.entities.list_memories(SearchFilters(), 10, 0, ctx).items[0]
    assert got.effective_confidence == pytest.approx(0.25, abs=0.01)
    assert service.entities.list_memories(SearchFilters(min_confidence=0.3), 10, 0, ctx).total == 0
    assert service.entities.list_memories(SearchFilters(min_confidence=0.2), 10, 0, ctx).total == 1


def test_access_reinforces_confidence_and_caps_at_one(service: MemoryService, ctx: CallContext, clock: Clock) -> None:
    a = store(service, ctx, "The staging database is on port 5433", confidence=0.5).memory
    b = store(service, ctx, "The production database is on port 5432", confidence=0.95).memory
    clock.now += timedelta(days=15)
    service.entities.get_memory(a.id, ctx)
    service.entities.get_memory(b.id, ctx)
    service.store.flush_access()
    a2 = service.entities.get_memory(a.id, ctx)
    b2 = service.entities.get_memory(b.id, ctx)
    assert a2.confidence == pytest.approx(0.6) and a2.last_accessed_at is not None
    assert a2.effective_confidence == pytest.approx(0.6, abs=0.01)  # decay restarts from the access
    assert b2.confidence == 1.0


def test_recall_memories_filters_by_min_confidence_by_default(service: MemoryService, ctx: CallContext, clock: Clock) -> None:
    store(service, ctx, "kestrel migration notes from last year")
    clock.now += timedelta(days=200)  # effective confidence ~0.01
    fresh = store(service, ctx, "kestrel migration plan for next week").memory
    hits = service.entities.recall_memories(RecallMemoriesInput(query="kestrel migration", search_mode="keyword"), ctx)
    assert [h.memory.id for h in hits.results] == [fresh.id]
    hits = service.entities.recall_memories(RecallMemoriesInput(query="kestrel migration", search_mode="keyword", min_confidence=0.0), ctx)
    assert len(hits.results) == 2


# ---------------------------------------------------------------- 10.4 entities and graph


def test_create_entity_with_embedding_and_dedupe(service: MemoryService, ctx: CallContext) -> None:
    ents = [{"name": "Alice", "entity_type": "person", "description": "Software engineer"}]
    out = service.entities.create_entities(CreateEntitiesInput.model_validate({"entities": ents}), ctx)
    assert out.created == 1 and out.entities[0].has_embedding and out.entities[0].entity_type == "person"
    again = service.entities.create_entities(
        CreateEntitiesInput.model_validate({"entities": [{"name": "alice", "entity_type": "person"}]}), ctx
    )
    assert again.created == 0 and again.entities[0].id == out.entities[0].id
    with pytest.raises(InvalidArgument):
        service.entities.create_entities(
            CreateEntitiesInput.model_validate({"entities": [{"name": "X", "entity_type": "a"}, {"name": "x", "entity_type": "b"}]}), ctx
        )


def test_relations_upsert_and_lookup_by_name(service: MemoryService, ctx: CallContext) -> None:
    relate(service, ctx, ("Alice", "Bob", "collaborates_with"), strength=0.8)
    relate(service, ctx, ("Alice", "Bob", "collaborates_with"), strength=0.6)  # a repeat updates
    page = service.entities.list_relations(None, None, 10, 0, ctx)
    assert page.total == 1
    r = page.items[0]
    assert (r.source, r.target, r.relation_type, r.strength) == ("Alice", "Bob", "collaborates_with", 0.6)
    names = {e.name: e.entity_type for e in service.entities.list_entities(None, None, 10, 0, ctx).items}
    assert names == {"Alice": "unknown", "Bob": "unknown"}


def test_entity_graph_depth_one_and_two(service: MemoryService, ctx: CallContext) -> None:
    relate(service, ctx, ("A", "B", "related_to"), ("A", "C", "related_to"), ("B", "D", "related_to"))
    assert graph_names(service, ctx, "A", 1) == {"A", "B", "C"}
    assert graph_names(service, ctx, "A", 2) == {"A", "B", "C", "D"}
    assert graph_names(service, ctx, "D", 1) == {"D", "B"}  # incoming relations are followed too
    g = service.entities.get_entity_graph(GetEntityGraphInput(entity_name="A", depth=1), ctx)
    assert {(e.source, e.target) for e in g.edges} == {("A", "B"), ("A", "C")}


def test_graph_min_strength_and_ranking(service: MemoryService, ctx: CallContext) -> None:
    relate(service, ctx, ("Hub", "Strong", "uses"), strength=0.9)
    relate(service, ctx, ("Hub", "Weak", "uses"), strength=0.2)
    g = service.entities.get_entity_graph(GetEntityGraphInput(entity_name="Hub", depth=1), ctx)
    assert [n.entity.name for n in g.nodes] == ["Hub", "Strong", "Weak"]
    assert [e.target for e in g.edges] == ["Strong", "Weak"]
    assert graph_names(service, ctx, "Hub", 1, min_strength=0.5) == {"Hub", "Strong"}


def test_graph_includes_memories(service: MemoryService, ctx: CallContext) -> None:
    m = store(service, ctx, "Carol leads the data platform", entity_names=["Carol"]).memory
    relate(service, ctx, ("Carol", "Data Platform", "manages"))
    g = service.entities.get_entity_graph(GetEntityGraphInput(entity_name="Data Platform", depth=1), ctx)
    carol = next(n for n in g.nodes if n.entity.name == "Carol")
    assert [x.id for x in carol.memories or []] == [m.id]
    g = service.entities.get_entity_graph(GetEntityGraphInput(entity_name="Data Platform", depth=1, include_memories=False), ctx)
    assert all(n.memories is None for n in g.nodes)
    with pytest.raises(NotFound):
        service.entities.get_entity_graph(GetEntityGraphInput(entity_name="Nobody"), ctx)


def test_entity_deletion_cascades_relations_not_memories(service: MemoryService, ctx: CallContext) -> None:
    m = store(service, ctx, "Dave maintains the CI runners", entity_names=["Dave"]).memory
    relate(service, ctx, ("Dave", "CI", "manages"))
    out = service.entities.delete_entities(DeleteEntitiesInput(entity_names=["Dave", "Ghost"]), ctx)
    assert len(out.deleted) == 1 and out.deleted_memories == [] and out.not_found == ["Ghost"]
    assert service.entities.list_relations(None, None, 10, 0, ctx).total == 0
    assert service.entities.get_memory(m.id, ctx).entities == []
    # with cascade_memories the associated memories go too
    m2 = store(service, ctx, "Erin runs the on-call rota", entity_names=["Erin"]).memory
    out = service.entities.delete_entities(DeleteEntitiesInput(entity_names=["Erin"], cascade_memories=True), ctx)
    assert out.deleted_memories == [m2.id]
    with pytest.raises(NotFound):
        service.entities.get_memory(m2.id, ctx)


def test_delete_relations_by_key(service: MemoryService, ctx: CallContext) -> None:
    relate(service, ctx, ("P", "Q", "depends_on"), ("P", "R", "depends_on"))
    keys = [{"source": "P", "target": "Q", "relation_type": "depends_on"}, {"source": "P", "target": "Z", "relation_type": "uses"}]
    out = service.entities.delete_relations(DeleteRelationsInput.model_validate({"relations": keys}), ctx)
    assert len(out.deleted) == 1 and out.not_found == [{"source": "P", "target": "Z", "relation_type": "uses"}]
    assert [r.target for r in service.entities.list_relations(None, None, 10, 0, ctx).items] == ["R"]


def test_entities_are_per_agent(service: MemoryService) -> None:
    a, b = CallContext(agent_id="agent-a"), CallContext(agent_id="agent-b")
    relate(service, a, ("Alice", "Bob", "collaborates_with"))
    assert service.entities.list_entities(None, None, 10, 0, b).total == 0
    with pytest.raises(NotFound):
        service.entities.get_entity_graph(GetEntityGraphInput(entity_name="Alice"), b)
    relate(service, b, ("Alice", "Zed", "manages"))  # B's own Alice: a different entity
    assert graph_names(service, a, "Alice", 1) == {"Alice", "Bob"}
    assert graph_names(service, b, "Alice", 1) == {"Alice", "Zed"}


# ---------------------------------------------------------------- 10.5 consolidation (hash embedder: identical texts cluster)


def test_consolidation_dry_run_merge_version_trail_and_entity_reassignment(service: MemoryService, ctx: CallContext, clock: Clock) -> None:
    a = store(service, ctx, "React hooks let function components keep state", entity_names=["X"], tags=["react"]).memory
    clock.now += timedelta(minutes=1)
    # through 000's face, which does not merge near duplicates on write (the entity face would)
    remembered = service.remember(
        RememberInput(content="React hooks let function components keep state!", topic="react", type="observation", tags=["hooks"]), ctx
    )
    b = service.entities.get_memory(remembered.id, ctx)
    service.entities.update_memory(b.id, UpdateMemoryInput(confidence=0.9, entity_names=["Y"]), ctx)
    store(service, ctx, "Postgres vacuum reclaims dead tuples")
    dry = service.entities.consolidate_memories(ConsolidateMemoriesInput(similarity_threshold=0.85, dry_run=True), ctx)
    assert dry.clusters_found == 1 and dry.memories_deleted == 0 and dry.dry_run
    assert dry.clusters[0].primary_id == a.id and dry.clusters[0].absorbed_ids == [b.id]
    assert service.entities.get_memory(b.id, ctx).id == b.id  # nothing changed
    done = service.entities.consolidate_memories(ConsolidateMemoriesInput(similarity_threshold=0.85), ctx)
    assert done.memories_merged == 1 and done.memories_deleted == 1
    with pytest.raises(NotFound):
        service.entities.get_memory(b.id, ctx)
    kept = service.entities.get_memory(a.id, ctx)
    assert sorted(kept.entities or []) == ["X", "Y"] and set(kept.tags) == {"react", "hooks"}
    notes = [v.get("note") for v in service.store.versions(service._scope(None, ctx), a.id)]
    assert f"merged:{b.id}" in notes


def test_stats(service: MemoryService, ctx: CallContext, clock: Clock) -> None:
    empty = service.entities.get_memory_stats(GetMemoryStatsInput(), ctx)
    assert empty.total_memories == 0 and empty.average_confidence is None and empty.oldest_memory is None
    store(service, ctx, "first observation", entity_names=["E1"])
    clock.now += timedelta(days=90)
    store(service, ctx, "a decision", memory_type="decision", entity_names=["E2"])
    relate(service, ctx, ("E1", "E2", "related_to"))
    s = service.entities.get_memory_stats(GetMemoryStatsInput(), ctx)
    assert (s.total_memories, s.total_entities, s.total_relations) == (2, 2, 1)
    assert s.memories_by_type == {"observation": 1, "decision": 1}
    assert s.low_confidence_count == 1  # the 90-day-old one is at 0.125
    assert s.average_confidence == pytest.approx((1.0 + 0.125) / 2, abs=0.01)
    assert s.oldest_memory is not None and s.newest_memory is not None and s.oldest_memory < s.newest_memory


def test_consolidation_prunes_memories_below_the_confidence_floor(service: MemoryService, ctx: CallContext, clock: Clock) -> None:
    faded = store(service, ctx, "a passing remark about the weather").memory
    kept_pinned = store(service, ctx, "the office door code changes monthly").memory
    service.amend(AmendInput(id=kept_pinned.id, record=RecordInput(pinned=True)), ctx)
    clock.now += timedelta(days=8)
    assert service.memory_consolidate(ConsolidateInput(), ctx).confidence_pruned == 0
    clock.now += timedelta(days=100)
    used = store(service, ctx, "the release checklist lives in the wiki").memory
    clock.now += timedelta(days=40)  # faded: 140 days in warm, unused (0.04)
    result = service.memory_consolidate(ConsolidateInput(), ctx)
    assert result.confidence_pruned == 1
    with pytest.raises(NotFound):
        service.entities.get_memory(faded.id, ctx)
    assert service.entities.get_memory(used.id, ctx).id == used.id
    assert service.entities.get_memory(kept_pinned.id, ctx).id == kept_pinned.id
    assert service.store.restore(service._scope(None, ctx), [faded.id]) == [faded.id]  # archived, not destroyed


def test_reindex_gives_entities_the_new_models_embedding(tmp_path: Path) -> None:
    """After an embedding-model change, `memento reindex` re-embeds entities too (the graph mode's
    nearest-entity lookup ignores vectors of another model)."""
    from memento.app import build_app
    from memento.cli.core import _reindex
    from memento.embeddings.hashing import HashEmbedder
    from memento.settings import Settings

    def app_with(dimensions: int) -> Any:
        settings = Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'm.db'}", EMBEDDING_PROVIDER="hash", EMBEDDING_DIMENSIONS=dimensions)
        return build_app(settings, embedder=HashEmbedder(dimensions))

    first = app_with(64)
    ents = [{"name": "Kestrel", "entity_type": "project", "description": "the billing rewrite"}]
    made = first.service.entities.create_entities(CreateEntitiesInput.model_validate({"entities": ents}), CallContext())
    assert made.entities[0].has_embedding
    first.close()
    second = app_with(32)
    try:
        ctx = CallContext()
        assert second.service.entities.list_entities(None, None, 10, 0, ctx).items[0].has_embedding is False  # another model's vector
        _reindex(second)
        assert second.service.entities.list_entities(None, None, 10, 0, ctx).items[0].has_embedding is True
    finally:
        second.close()


def test_memory_system_filters_listing_and_every_search_mode(service: MemoryService, ctx: CallContext) -> None:
    episode = store(service, ctx, "wren release went out late on friday", memory_type="observation").memory
    service.amend(AmendInput(id=episode.id, record=RecordInput(memorySystem="episodic")), ctx)
    semantic = store(service, ctx, "wren release notes live in the wiki").memory
    only = SearchFilters(memory_system="episodic")
    assert [m.id for m in service.entities.list_memories(only, 10, 0, ctx).items] == [episode.id]
    for mode in ("keyword", "hybrid"):
        hits = service.entities.recall_memories(RecallMemoriesInput(query="wren release", search_mode=mode, memory_system="semantic"), ctx)
        assert [h.memory.id for h in hits.results] == [semantic.id], mode


def test_a_member_pinned_or_amended_after_its_cluster_was_found_is_not_absorbed(service: MemoryService, ctx: CallContext) -> None:
    """A cluster is found from reads; the merge reads its memories again inside its transaction."""
    scope = AgentScope("default")
    primary = service.remember(RememberInput(content="Team lunch is on Fridays at noon", topic="team", type="fact"), ctx).id
    pinned = service.remember(RememberInput(content="Team lunch is on Fridays at noon!", topic="team", type="fact"), ctx).id
    amended = service.remember(RememberInput(content="Team lunch is on Fridays at noon.", topic="team", type="fact"), ctx).id
    found = {f.id: f for f in service.store.get_many(scope, [primary, pinned, amended])}
    cluster = Cluster(found[primary], ((found[pinned], 0.99), (found[amended], 0.99)))
    service.pin(PinInput(id=pinned), ctx)  # both land after the cluster was found
    service.amend(AmendInput(id=amended, content="Team lunch moved to Thursdays at one"), ctx)
    assert service.entities.merger.merge(scope, cluster, service.clock()) == []
    kept = {f.id: f for f in service.store.get_many(scope, [primary, pinned, amended])}
    assert set(kept) == {primary, pinned, amended} and kept[amended].content == "Team lunch moved to Thursdays at one"
    assert not [v for v in service.store.versions(scope, primary) if "merged:" in str(v.get("note"))]  # nothing archived either
    untouched = service.remember(RememberInput(content="Team lunch is on Fridays at noon!!", topic="team", type="fact"), ctx).id
    again = Cluster(kept[primary], ((service.store.get_many(scope, [untouched])[0], 0.99),))
    assert service.entities.merger.merge(scope, again, service.clock()) == [untouched]  # an unchanged member still merges
