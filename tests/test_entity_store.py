"""The entity-graph contract (EntityStore, 001 §2.2-§2.4) and the storage side of 001's memory
features (the §5.6 filter fields, confidence reinforcement, the version trail), called directly on
SQLite and on PostgreSQL with the same assertions."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from trace_helpers import traced_statements

from memento.analysis import index_terms
from memento.app import App
from memento.errors import Conflict, Forbidden, InvalidArgument, NotFound
from memento.graph import EntityChanges, NewEntity, NewRelation
from memento.models import AgentScope, FragmentType, PoolWrites, RecordFields, TTLTier
from memento.service import MemoryService
from memento.storage import sqlfilter
from memento.storage.protocol import REINFORCEMENT, AppStore, FragmentChanges, MaintenanceStore, NewFragment, SearchFilter, VersionRecord

pytestmark = pytest.mark.backends("sqlite", "postgres")

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
A, B = AgentScope("alice"), AgentScope("bob")
SYSTEM = AgentScope("system")


@pytest.fixture
def store(app: App) -> AppStore:
    return app.store


def put(
    service: MemoryService, content: str, agent: str = "alice", *, created: datetime = NOW, source: str | None = None, **record: Any
) -> str:
    draft = service.factory.draft(
        content=content,
        topic="graph",
        type_=FragmentType.FACT,
        created_at=created,
        keywords=["widget"],
        source=source,
        record=RecordFields(**record),
    )
    vector = service.embedder.embed_passages([draft.content])[0] if service.embedder else None
    fragment, created_now = service.store.insert(AgentScope(agent), NewFragment(draft, agent, None, vector))
    assert created_now
    return fragment.id


def entity(store: AppStore, name: str, scope: AgentScope = A, **kw: Any) -> str:
    ((found, _),) = store.upsert_entities(scope, [NewEntity(name, **kw)], NOW)
    return found.id


def raw(store: AppStore, statement: str, params: tuple[Any, ...] = ()) -> None:
    """A statement run on the database behind the store's back (as the maintenance agent)."""
    from memento.storage.sqlite import SQLiteStore

    if isinstance(store, SQLiteStore):
        with store.db.tx() as conn:
            conn.execute(statement, params)
    else:
        with store.db.tx("system") as cur:  # type: ignore[attr-defined]
            cur.execute(
                statement.replace("?", "%s").replace("FROM ", "FROM agent_memory.").replace("UPDATE ", "UPDATE agent_memory."), params
            )


# ---------------------------------------------------------------- entities


def test_upsert_creates_once_per_agent_and_merges_a_repeated_name(store: AppStore) -> None:
    ((alice, created),) = store.upsert_entities(A, [NewEntity("Alice", "person", "an engineer", {"team": "core"})], NOW)
    assert created and alice.id.startswith("ent-") and (alice.name, alice.entity_type, alice.agent_id) == ("Alice", "person", "alice")
    later = NOW + timedelta(hours=1)
    ((again, created_again),) = store.upsert_entities(A, [NewEntity("  alice ", metadata={"city": "Oslo"})], later)
    assert not created_again and again.id == alice.id
    # unknown never overwrites a type; no description keeps the stored one; metadata merges shallowly
    assert (again.name, again.entity_type, again.description) == ("Alice", "person", "an engineer")
    assert again.metadata == {"team": "core", "city": "Oslo"} and again.updated_at == later and again.created_at == NOW
    ((vague, _),) = store.upsert_entities(A, [NewEntity("Kubernetes")], NOW)
    assert vague.entity_type == "unknown"
    (typed, _), (same, made) = store.upsert_entities(
        A, [NewEntity("kubernetes", "technology", "orchestrator"), NewEntity("KUBERNETES")], NOW
    )
    assert (typed.id, typed.entity_type, typed.description) == (vague.id, "technology", "orchestrator")
    assert same.id == vague.id and not made
    ((bobs, bob_created),) = store.upsert_entities(B, [NewEntity("Alice", "person")], NOW)  # names are per agent
    assert bob_created and bobs.id != alice.id
    assert [e.id for e in store.entities_named(A, ["ALICE", "nobody", "kubernetes"])] == [alice.id, vague.id]
    assert [e.id for e in store.entities_named(SYSTEM, ["alice"])] == [alice.id, bobs.id]  # by agent
    assert [e.id for e in store.get_entities(A, [bobs.id, alice.id, "ent-missing"])] == [alice.id]
    with pytest.raises(InvalidArgument):
        store.upsert_entities(A, [NewEntity("   ")], NOW)
    with pytest.raises(Conflict):
        store.upsert_entities(A, [NewEntity("Carol", id=alice.id)], NOW)
    assert store.entities_named(A, ["Carol"]) == []


def test_list_entities_filters_pages_and_counts(store: AppStore) -> None:
    for name, type_ in [("Postgres", "technology"), ("Redis", "technology"), ("Bob", "person"), ("postman", "technology")]:
        entity(store, name, entity_type=type_)
    entity(store, "Post office", B)
    page, total = store.list_entities(A, entity_type=None, name_contains=None, limit=2, offset=0)
    assert total == 4 and [e.name for e in page] == ["Bob", "Postgres"]
    page, total = store.list_entities(A, entity_type=None, name_contains=None, limit=2, offset=2)
    assert total == 4 and [e.name for e in page] == ["postman", "Redis"]
    page, total = store.list_entities(A, entity_type="technology", name_contains="POST", limit=10, offset=0)
    assert total == 2 and [e.name for e in page] == ["Postgres", "postman"]
    assert store.list_entities(SYSTEM, entity_type=None, name_contains="post", limit=10, offset=0)[1] == 3


def test_update_entity_renames_replaces_and_refuses_a_taken_name(store: AppStore) -> None:
    alice = entity(store, "Alice", entity_type="person", metadata={"a": 1})
    entity(store, "Carol")
    later = NOW + timedelta(days=1)
    changed = store.update_entity(A, alice, EntityChanges(name="ALICE", description="lead", metadata={"b": 2}), later)
    assert (changed.name, changed.description, changed.metadata, changed.entity_type, changed.updated_at) == (
        "ALICE",
        "lead",
        {"b": 2},
        "person",
        later,
    )
    with pytest.raises(Conflict):
        store.update_entity(A, alice, EntityChanges(name="carol"), later)
    with pytest.raises(NotFound):
        store.update_entity(B, alice, EntityChanges(name="stolen"), later)
    with pytest.raises(NotFound):
        store.update_entity(A, "ent-missing", EntityChanges(name="x"), later)
    assert store.get_entities(A, [alice])[0].name == "ALICE"
    assert [e.id for e in store.entities_named(A, ["alice"])] == [alice]


def test_entity_vectors_are_the_current_models_only(store: AppStore) -> None:
    if store.embedding_model is None:
        pytest.skip("the store has no embedding model")
    vector = np.linspace(-1, 1, 256, dtype=np.float32)
    (with_vector, _), (without, _) = store.upsert_entities(A, [NewEntity("Alice", embedding=vector), NewEntity("Bob")], NOW)
    entity(store, "Carol", B, embedding=vector)
    assert with_vector.has_embedding and not without.has_embedding
    [(found, stored)] = store.entity_vectors(A)
    assert found == with_vector.id and stored.dtype == np.float32 and np.array_equal(stored, vector)
    assert len(store.entity_vectors(SYSTEM)) == 2
    raw(store, "UPDATE entities SET embedding_model = ? WHERE id = ?", ("an-older-model", with_vector.id))
    assert store.entity_vectors(A) == [] and not store.get_entities(A, [with_vector.id])[0].has_embedding
    changed = store.update_entity(A, with_vector.id, EntityChanges(embedding=vector * 2), NOW)
    assert changed.has_embedding and np.array_equal(store.entity_vectors(A)[0][1], vector * 2)


# ---------------------------------------------------------------- relations


def test_relations_upsert_by_source_target_and_type(store: AppStore) -> None:
    alice, acme, bob = entity(store, "Alice"), entity(store, "Acme"), entity(store, "Bob")
    ((works, created),) = store.upsert_relations(A, [NewRelation(alice, acme, "works_at", 0.5, context="since 2020")], NOW)
    assert created and works.id.startswith("rel-") and (works.source_name, works.target_name, works.strength) == ("Alice", "Acme", 0.5)
    later = NOW + timedelta(hours=2)
    (again, created_again), (knows, _) = store.upsert_relations(
        A, [NewRelation(alice, acme, "works_at", 0.9, 0.8, metadata={"k": 1}), NewRelation(bob, alice, "reports_to", 0.3)], later
    )
    assert not created_again and again.id == works.id
    assert (again.strength, again.confidence, again.context, again.metadata, again.updated_at) == (0.9, 0.8, None, {"k": 1}, later)
    assert [r.id for r in store.relations_of(A, [alice], 0.0)] == [works.id, knows.id]  # strongest first, both directions
    assert [r.id for r in store.relations_of(A, [alice], 0.5)] == [works.id]
    page, total = store.list_relations(A, entity_id=acme, relation_type=None, limit=10, offset=0)
    assert total == 1 and [r.id for r in page] == [works.id]
    page, total = store.list_relations(A, entity_id=None, relation_type=None, limit=1, offset=1)
    assert total == 2 and [r.id for r in page] == [knows.id]
    assert store.list_relations(A, entity_id=None, relation_type="reports_to", limit=10, offset=0)[1] == 1
    bobs = entity(store, "Dave", B)
    with pytest.raises(NotFound):
        store.upsert_relations(A, [NewRelation(alice, bobs, "knows")], NOW)
    with pytest.raises(NotFound):
        store.upsert_relations(B, [NewRelation(bobs, alice, "knows")], NOW)
    with pytest.raises(InvalidArgument):
        store.upsert_relations(A, [NewRelation(alice, bob, "knows", strength=1.5)], NOW)
    assert store.get_relations(B, [works.id]) == [] and [r.id for r in store.get_relations(A, [works.id])] == [works.id]
    assert store.delete_relations(B, [works.id]) == []
    assert store.delete_relations(A, [works.id, "rel-missing"]) == [works.id]
    assert store.list_relations(A, entity_id=None, relation_type=None, limit=10, offset=0)[1] == 1


# ---------------------------------------------------------------- associations


def test_link_entities_keeps_the_higher_relevance_and_refuses_what_the_scope_cannot_see(service: MemoryService, store: AppStore) -> None:
    alice = entity(store, "Alice")
    mine, pool, bobs = (
        put(service, "alice ships the widget"),
        put(service, "the pool knows the widget", "default"),
        put(service, "bob's", "bob"),
    )
    assert store.link_entities(A, [(alice, mine, 0.4), (alice, pool, 1.0)], NOW) == 2
    assert store.link_entities(A, [(alice, mine, 0.8)], NOW) == 0
    assert store.link_entities(A, [(alice, mine, 0.3)], NOW) == 0
    links = {link.fragment_id: link.relevance for link in store.entity_links(A, entity_ids=[alice])}
    assert links == {mine: 0.8, pool: 1.0}
    with pytest.raises(NotFound, match=bobs):  # another agent's memory: nothing of the batch is written
        store.link_entities(A, [(alice, mine, 1.0), (alice, bobs, 1.0)], NOW)
    with pytest.raises(NotFound):
        store.link_entities(A, [("ent-missing", mine, 1.0)], NOW)
    with pytest.raises(NotFound):  # bob cannot use alice's entity, even on a memory he sees
        store.link_entities(B, [(alice, pool, 1.0)], NOW)
    with pytest.raises(InvalidArgument):
        store.link_entities(A, [(alice, mine, 2.0)], NOW)
    assert {link.fragment_id: link.relevance for link in store.entity_links(A, entity_ids=[alice])} == links
    assert [link.entity_id for link in store.entity_links(A, fragment_ids=[mine])] == [alice]
    assert store.entity_links(B, fragment_ids=[pool]) == []
    assert [link.fragment_id for link in store.entity_links(A, entity_ids=[alice], fragment_ids=[pool])] == [pool]


def test_entity_links_show_live_memories_only(service: MemoryService, store: AppStore) -> None:
    alice = entity(store, "Alice")
    kept, forgotten = put(service, "a kept widget note"), put(service, "a forgotten widget note")
    expired = put(service, "an expired widget note", expires_at=datetime(2020, 1, 1, tzinfo=UTC))
    store.link_entities(A, [(alice, kept, 1.0), (alice, forgotten, 1.0)], NOW)
    raw(store, "UPDATE fragments SET expires_at = NULL WHERE id = ?", (expired,))
    store.link_entities(A, [(alice, expired, 1.0)], NOW)
    raw(store, "UPDATE fragments SET expires_at = ? WHERE id = ?", ("2020-01-01T00:00:00.000000+00:00", expired))
    store.soft_delete(A, [forgotten], NOW)
    assert [link.fragment_id for link in store.entity_links(A, entity_ids=[alice])] == [kept]
    assert store.graph_counts(A) == {"entities": 1, "relations": 0, "links": 1}
    store.restore(A, [forgotten])
    assert {link.fragment_id for link in store.entity_links(A, entity_ids=[alice])} == {kept, forgotten}


def test_deleting_an_entity_takes_its_relations_and_links_never_the_memories(service: MemoryService, store: AppStore) -> None:
    alice, acme = entity(store, "Alice"), entity(store, "Acme")
    note = put(service, "alice joined acme's widget team")
    store.upsert_relations(A, [NewRelation(alice, acme, "works_at"), NewRelation(acme, alice, "employs")], NOW)
    store.link_entities(A, [(alice, note, 1.0), (acme, note, 0.5)], NOW)
    assert store.delete_entities(B, [alice]) == []
    assert store.delete_entities(A, [alice, "ent-missing"]) == [alice]
    assert store.get_entities(A, [alice]) == [] and store.list_relations(A, entity_id=None, relation_type=None, limit=9, offset=0)[1] == 0
    assert [link.entity_id for link in store.entity_links(A, fragment_ids=[note])] == [acme]
    assert store.get_many(A, [note])[0].id == note
    assert store.graph_counts(A) == {"entities": 1, "relations": 0, "links": 1}


def test_deleting_a_memory_takes_its_links(service: MemoryService, app: App, store: AppStore) -> None:
    alice = entity(store, "Alice")
    plain, kept = put(service, "deleted through forget's hard path"), put(service, "kept widget")
    old = put(service, "an old cold widget fact", created=NOW - timedelta(days=400))
    store.update(A, old, FragmentChanges(ttl_tier=TTLTier.COLD, importance=0.1), "alice", NOW)
    store.link_entities(A, [(alice, plain, 1.0), (alice, kept, 1.0), (alice, old, 1.0)], NOW)
    assert store.delete(A, [plain]) == [plain]
    maintenance: MaintenanceStore = service.consolidator.maintenance
    assert len(maintenance.expire_cold(A, None, [], NOW - timedelta(days=90))) == 1  # the lifecycle's delete
    assert [link.fragment_id for link in store.entity_links(SYSTEM, entity_ids=[alice])] == [kept]
    assert store.graph_counts(SYSTEM)["links"] == 1
    with pytest.raises(NotFound):  # a deleted memory cannot be linked again
        store.link_entities(A, [(alice, plain, 1.0)], NOW)


def test_move_entity_links_merges_into_the_survivor(service: MemoryService, store: AppStore) -> None:
    alice, acme, bobs = entity(store, "Alice"), entity(store, "Acme"), entity(store, "Bob", B)
    absorbed, survivor = put(service, "the widget merged away"), put(service, "the widget survivor")
    pool = put(service, "a pool widget", "default")
    store.link_entities(A, [(alice, absorbed, 0.9), (acme, absorbed, 0.2), (acme, survivor, 0.6)], NOW)
    store.link_entities(B, [(bobs, pool, 1.0)], NOW)
    assert store.move_entity_links(A, absorbed, survivor, NOW) == 2
    assert store.entity_links(A, fragment_ids=[absorbed]) == []
    moved = {link.entity_id: link.relevance for link in store.entity_links(A, fragment_ids=[survivor])}
    assert moved == {alice: 0.9, acme: 0.6}
    with pytest.raises(NotFound):
        store.move_entity_links(A, survivor, "frag-missing", NOW)
    assert store.move_entity_links(A, pool, survivor, NOW) == 0  # bob's link on the pool memory is not alice's to move
    assert [link.entity_id for link in store.entity_links(B, fragment_ids=[pool])] == [bobs]


def test_agents_never_see_each_others_graph(service: MemoryService, store: AppStore) -> None:
    alice, acme = entity(store, "Alice"), entity(store, "Acme")
    ((rel, _),) = store.upsert_relations(A, [NewRelation(alice, acme, "works_at")], NOW)
    note = put(service, "a pool widget note", "default")
    store.link_entities(A, [(alice, note, 1.0)], NOW)
    assert store.get_entities(B, [alice, acme]) == [] and store.entities_named(B, ["Alice"]) == []
    assert store.list_entities(B, entity_type=None, name_contains=None, limit=10, offset=0) == ([], 0)
    assert store.list_relations(B, entity_id=alice, relation_type=None, limit=10, offset=0) == ([], 0)
    assert store.relations_of(B, [alice], 0.0) == [] and store.get_relations(B, [rel.id]) == []
    assert store.entity_links(B, entity_ids=[alice]) == [] and store.entity_links(B, fragment_ids=[note]) == []
    assert store.graph_counts(B) == {"entities": 0, "relations": 0, "links": 0}
    assert store.count(B, SearchFilter(entity_id=alice)) == 0 and store.count(A, SearchFilter(entity_id=alice)) == 1
    assert store.move_entity_links(B, note, note, NOW) == 0 and store.delete_entities(B, [alice]) == []
    assert store.graph_counts(A) == {"entities": 2, "relations": 1, "links": 1} == store.graph_counts(SYSTEM)


@pytest.mark.backends("postgres")
def test_row_level_security_alone_isolates_the_graph(service: MemoryService, store: AppStore, backend: str) -> None:
    alice = entity(store, "Alice")
    bobs = entity(store, "Bob", B)
    note = put(service, "a pool widget note", "default")
    store.link_entities(A, [(alice, note, 1.0)], NOW)
    store.upsert_relations(B, [NewRelation(bobs, bobs, "related_to")], NOW)
    import psycopg

    db = store.db  # type: ignore[attr-defined]

    def seen(agent: str) -> tuple[list[str], int, int]:
        with db.tx(agent) as cur:  # no agent predicate: only the policies of migration 0007 filter
            cur.execute(
                "SELECT (SELECT array_agg(id ORDER BY id) FROM agent_memory.entities) AS ids,"
                " (SELECT COUNT(*) FROM agent_memory.relations) AS relations, (SELECT COUNT(*) FROM agent_memory.entity_memories) AS links"
            )
            row = cur.fetchone()
        return list(row["ids"] or []), int(row["relations"]), int(row["links"])

    assert seen("bob") == ([bobs], 1, 0)
    assert seen("alice") == ([alice], 0, 1)
    assert seen("system") == (sorted([alice, bobs]), 1, 1)
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"), db.tx("bob") as cur:
        cur.execute("INSERT INTO agent_memory.entities (id, agent_id, name) VALUES ('ent-forged', 'alice', 'Forged')")
    assert seen("system")[0] == sorted([alice, bobs])


# ---------------------------------------------------------------- 001 §5.6 filters at every tier


def _tiers(store: AppStore, service: MemoryService, scope: AgentScope, filt: SearchFilter) -> dict[str, set[str]]:
    """The ids every tier returns under `filt` (all of them: the limits exceed the store)."""
    vector = service.embedder.embed_query("widget note") if service.embedder else None
    found = {
        "list": {f.id for f in store.list_fragments(scope, filt, 100)},
        "recent": {f.id for f in store.recent(scope, filt, 100)},
        "page": {f.id for f in store.page(scope, filt, None, 100)},
        "keyword": {h.id for h in store.keyword_search(scope, ["widget"], filt, 100)},
        "text": {h.id for h in store.text_search(scope, index_terms("widget"), filt, 100)},
    }
    if vector is not None:
        found["vector"] = {h.id for h in store.vector_search(scope, vector, filt, 100)}
    assert store.count(scope, filt) == len(found["list"])
    return found


def test_every_tier_applies_the_new_filter_fields_as_search_filter_matches_does(service: MemoryService, store: AppStore) -> None:
    days = [0, 10, 20, 45, 90]
    ids = [
        put(service, f"widget note number {i}", created=NOW - timedelta(days=d), source="slack" if i % 2 else "email", confidence=c)
        for i, (d, c) in enumerate(zip(days, [1.0, 0.9, 0.7, 1.0, 0.95], strict=True))
    ]
    put(service, "bob's widget note", "bob", source="slack")
    store.record_access([ids[4]], NOW - timedelta(days=1))  # a recent access: its decay starts there
    store.flush_access()
    alice, other = entity(store, "Alice"), entity(store, "Other")
    store.link_entities(A, [(alice, ids[1], 1.0), (alice, ids[3], 0.5), (other, ids[0], 1.0)], NOW)
    everything = store.get_many(A, ids)
    filters = [
        SearchFilter(created_after=NOW - timedelta(days=20)),  # strictly after: the 20-day-old note is out
        SearchFilter(created_before=NOW - timedelta(days=20)),
        SearchFilter(created_after=NOW - timedelta(days=50), created_before=NOW),
        SearchFilter(source="slack"),
        SearchFilter(source="nowhere"),
        SearchFilter(min_confidence=0.6, now=NOW, half_life_days=30.0),
        SearchFilter(min_confidence=0.9, now=NOW + timedelta(days=3), half_life_days=30.0),
        SearchFilter(min_confidence=0.5, now=NOW, half_life_days=0.0),
        SearchFilter(min_confidence=0.5, now=NOW, half_life_days=45.0),  # exactly 0.5 after one half-life: kept
        SearchFilter(min_confidence=0.99, now=NOW - timedelta(days=400), half_life_days=30.0),  # before creation: no decay
        SearchFilter(source="email", min_confidence=0.3, now=NOW, half_life_days=60.0),
    ]
    for filt in filters:
        expected = {f.id for f in everything if filt.matches(f)}
        assert all(found == expected for found in _tiers(store, service, A, filt).values()), filt
    assert {f.id for f in everything if SearchFilter(min_confidence=0.6, now=NOW).matches(f)} == {ids[0], ids[1], ids[4]}
    linked = SearchFilter(entity_id=alice)
    assert all(found == {ids[1], ids[3]} for found in _tiers(store, service, A, linked).values())
    both = SearchFilter(entity_id=alice, source="slack", created_after=NOW - timedelta(days=30))
    assert all(found == {ids[1]} for found in _tiers(store, service, A, both).values())
    assert all(found == set() for found in _tiers(store, service, B, linked).values())
    assert store.count(SYSTEM, linked) == 2


def test_an_entity_filter_starts_from_the_entity_s_memories_where_a_statement_may(
    service: MemoryService, store: AppStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A count, and a listing whose bounded walk falls short, start from the entity's memories
    (the set of them from entity_memories, not a probe of every row of the namespace: ~300 ms at
    a million memories); the rows are the same, in order, for the owner and nobody else."""
    monkeypatch.setattr(sqlfilter, "LISTING_WALK_MIN", 3)
    monkeypatch.setattr(sqlfilter, "LISTING_WALK_PER_ROW", 1)
    ids = [put(service, f"gadget note number {i}", created=NOW - timedelta(hours=i)) for i in range(12)]
    alice = entity(store, "Alice")
    store.link_entities(A, [(alice, ids[9], 1.0), (alice, ids[11], 0.5), (alice, ids[2], 1.0)], NOW)
    linked = SearchFilter(entity_id=alice)
    counted = traced_statements(store, lambda: store.count(A, linked))
    assert store.count(A, linked) == 3 and store.count(B, linked) == 0
    assert any("(SELECT em.fragment_id FROM" in s for s in counted), counted
    assert not any("EXISTS (SELECT 1 FROM" in s and "entity_memories" in s for s in counted), counted
    assert [f.id for f in store.recent(A, linked, 2)] == [ids[2], ids[9]]  # the walk of 3 falls short: sorted
    in_order = [f.id for f in store.list_fragments(A, SearchFilter(), 20) if f.id in {ids[2], ids[9], ids[11]}]
    assert [f.id for f in store.list_fragments(A, linked, 10)] == in_order and len(in_order) == 3
    assert store.recent(B, linked, 5) == []


# ---------------------------------------------------------------- reinforcement and versions


def test_every_access_reinforces_the_stored_confidence_up_to_one(service: MemoryService, store: AppStore) -> None:
    fid = put(service, "a reinforced widget", confidence=0.5)
    store.record_access([fid, fid, fid], NOW)
    store.flush_access()
    got = store.get_many(A, [fid])[0]
    assert got.confidence == pytest.approx(0.5 + 3 * REINFORCEMENT) and got.access_count == 3
    store.record_access([fid] * 5, NOW + timedelta(hours=1))
    store.flush_access()
    assert store.get_many(A, [fid])[0].confidence == 1.0


def test_versions_keep_the_record_fields_and_add_version_archives_a_merge(service: MemoryService, store: AppStore) -> None:
    fid = put(service, "the widget ships in May", confidence=0.7, tags=("release",), metadata={"q": 2})
    store.update(A, fid, FragmentChanges(confidence=0.9, tags=("release", "late"), importance=0.8), "alice", NOW)
    absorbed = VersionRecord(
        "the widget ships in spring", "graph", ("widget",), FragmentType.FACT, 0.5, "merge", 0.6, {"m": 1}, ("x",), "merged:frag-x"
    )
    first = store.add_version(A, fid, absorbed, NOW + timedelta(minutes=1))
    second = store.add_version(A, fid, replace(absorbed, confidence=None, metadata=None, tags=None, note=None), NOW + timedelta(minutes=2))
    assert second > first
    versions = store.versions(A, fid)
    assert [(v["content"], v["confidence"], v["metadata"], v["tags"], v["note"], v["amended_by"]) for v in versions] == [
        ("the widget ships in May", 0.7, {"q": 2}, ["release"], None, "alice"),
        ("the widget ships in spring", 0.6, {"m": 1}, ["x"], "merged:frag-x", "merge"),
        ("the widget ships in spring", None, None, None, None, "merge"),
    ]
    assert versions[1]["keywords"] == ["widget"] and versions[1]["type"] == "fact" and versions[1]["importance"] == 0.5
    with pytest.raises(NotFound):
        store.add_version(B, fid, absorbed, NOW)
    pool = put(service, "a pool widget fact", "default")
    with pytest.raises(Forbidden):
        store.add_version(AgentScope("bob", PoolWrites.NONE), pool, absorbed, NOW)
    assert len(store.versions(A, fid)) == 3 and store.versions(A, pool) == []


def test_names_fold_case_alike_on_every_backend_beyond_ascii(store: AppStore) -> None:
    """The case-folded key is computed in Python: PostgreSQL's lower() under the C locale folds
    ASCII only, which would make "Élan" and "élan" two entities there and one on SQLite."""
    made = store.upsert_entities(A, [NewEntity(name="Élan Vital", entity_type="project")], NOW)
    again = store.upsert_entities(A, [NewEntity(name="élan vital")], NOW)
    assert again[0][1] is False and again[0][0].id == made[0][0].id
    assert [e.id for e in store.entities_named(A, ["ÉLAN VITAL"])] == [made[0][0].id]
    assert store.list_entities(A, entity_type=None, name_contains="ÉLAN", limit=10, offset=0)[1] == 1
