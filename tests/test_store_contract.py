"""The store contract: every method of the Store and MaintenanceStore protocols, called directly on
SQLite and on PostgreSQL with the same assertions. The service suites check behaviour through
MemoryService; this one pins what each backend itself promises, so a divergence the service
happens to mask still fails here."""

from __future__ import annotations

import dataclasses
import threading
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import numpy as np
import pytest
from trace_helpers import traced_statements

from memento.analysis import query_terms
from memento.errors import Conflict, Forbidden, InvalidArgument, NotFound
from memento.models import (
    AgentScope,
    CallContext,
    FeedbackEvent,
    FragmentType,
    LinkInput,
    MemorySystem,
    PoolWrites,
    PrivacyScope,
    RecallInput,
    RecordFields,
    RelationType,
    TTLTier,
)
from memento.service import MemoryService
from memento.storage import sqlfilter
from memento.storage.protocol import (
    AnalyticsStore,
    BulkStore,
    FragmentChanges,
    LinkageStore,
    MaintenanceStore,
    NewFeedback,
    NewFragment,
    NewLinkage,
    NewSkip,
    SearchFilter,
    Store,
    StoredIdentity,
    WorkingMemoryStore,
)
from memento.storage.terms import COMMON_TERM_MIN_DOCS, COUNT_TTL_S, CountCache, FrequentCounts
from memento.storage.workmem import ItemChanges, ItemQuery, WorkItem

pytestmark = pytest.mark.backends("sqlite", "postgres")

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
A, B = AgentScope("alice"), AgentScope("bob")
SYSTEM = AgentScope("system")


def new(
    service: MemoryService,
    content: str,
    agent: str = "alice",
    *,
    type_: str = "fact",
    topic: str = "general",
    session: str | None = None,
    created: datetime = NOW,
    links: tuple[str, ...] = (),
    importance: float | None = None,
    is_anchor: bool = False,
    **record: Any,
) -> NewFragment:
    draft = service.factory.draft(
        content=content,
        topic=topic,
        type_=FragmentType(type_),
        created_at=created,
        importance=importance,
        is_anchor=is_anchor,
        record=RecordFields(**record),
    )
    vector = service.embedder.embed_passages([draft.content])[0] if service.embedder else None
    return NewFragment(draft, agent, session, vector, links, own_session=session is not None)


def put(service: MemoryService, content: str, agent: str = "alice", **kw: Any) -> str:
    fragment, created = service.store.insert(AgentScope(agent), new(service, content, agent, **kw))
    assert created
    return fragment.id


@pytest.fixture
def store(service: MemoryService) -> Store:
    return service.store


def test_insert_is_idempotent_on_content_and_get_many_respects_scope(service: MemoryService, store: Store) -> None:
    first, created = store.insert(A, new(service, "the cache holds 512 entries"))
    again, created_again = store.insert(A, new(service, "the cache holds 512 entries", topic="other"))
    assert created and not created_again and again.id == first.id
    bobs, _ = store.insert(B, new(service, "the cache holds 512 entries", "bob"))  # per agent
    assert bobs.id != first.id
    assert [f.id for f in store.get_many(A, [first.id, bobs.id, "frag-missing"])] == [first.id]
    assert [f.id for f in store.get_many(SYSTEM, [first.id, bobs.id])] == [first.id, bobs.id] or {
        f.id for f in store.get_many(SYSTEM, [first.id, bobs.id])
    } == {first.id, bobs.id}
    assert first.has_embedding and first.seq > 0 and first.memory_system.value == "semantic"


def test_insert_links_checks_targets_and_refuses_a_foreign_session(service: MemoryService, store: Store) -> None:
    target = put(service, "the root cause was a stale DNS record")
    with pytest.raises(NotFound, match="frag-nope"):
        store.insert(A, new(service, "a fix that links nowhere", links=("frag-nope",)))
    linked, _ = store.insert(A, new(service, "flushed the resolver cache", links=(target,)))
    assert linked.linked_to == [target]
    put(service, "alice's scratch note", session="sess-a")
    foreign = new(service, "bob writes into alice's session", "bob", session="sess-a")
    with pytest.raises(Forbidden):
        store.insert(B, NewFragment(foreign.draft, "bob", "sess-a", None, (), own_session=False))
    assert store.session_owners("sess-a") == ["alice"]


def test_update_archives_a_version_and_refuses_a_content_clash(service: MemoryService, store: Store) -> None:
    fid = put(service, "retries are capped at three")
    other = put(service, "timeouts are thirty seconds")
    changed = store.update(A, fid, FragmentChanges(topic="retries", importance=0.9, tags=("ops",), pinned=True), "alice", NOW)
    assert (changed.topic, changed.importance, changed.tags, changed.pinned) == ("retries", 0.9, ["ops"], True)
    versions = store.versions(A, fid)
    assert len(versions) == 1 and versions[0]["topic"] == "general"
    clash = service.factory.clean_content("timeouts are thirty seconds")
    from memento.factory import content_hash

    with pytest.raises(Conflict):
        store.update(A, fid, FragmentChanges(content=clash, content_hash=content_hash(clash)), "alice", NOW)
    assert store.get_many(A, [fid])[0].topic == "retries" and store.get_many(A, [other])
    with pytest.raises(NotFound):
        store.update(B, fid, FragmentChanges(topic="stolen"), "bob", NOW)


def test_supersede_links_lowers_the_original_and_is_one_transaction(service: MemoryService, store: Store) -> None:
    old = put(service, "deploys happen on fridays")
    successor, created = store.supersede(A, old, new(service, "deploys happen on tuesdays"), 0.5, NOW)
    assert created
    original = store.get_many(A, [old])[0]
    assert original.importance == pytest.approx(0.25)
    assert [(link.relation_type, f.id) for link, f in store.neighbours(A, [old], [RelationType.SUPERSEDED_BY], 10)] == [
        (RelationType.SUPERSEDED_BY, successor.id)
    ]
    again, created_again = store.supersede(A, old, new(service, "deploys happen on tuesdays"), 0.5, NOW)
    assert again.id == successor.id and not created_again  # the same successor: no second row
    with pytest.raises(Conflict):  # superseding with the original's own content
        store.supersede(A, old, new(service, "deploys happen on fridays"), 0.5, NOW)
    assert store.get_many(A, [old])[0].importance == pytest.approx(0.125)


def test_neighbours_follow_links_both_ways_within_the_scope(service: MemoryService, store: Store) -> None:
    a, b, c, d = (
        put(service, text)
        for text in ("the harbour opens at six", "the ferry leaves at seven", "the cafe by the pier", "tickets are sold on board")
    )
    ctx = CallContext(agent_id="alice")
    service.link(LinkInput(fromId=a, toId=b, relationType=RelationType.CAUSED_BY), ctx)
    service.link(LinkInput(fromId=c, toId=a, relationType=RelationType.RELATED), ctx)
    service.link(LinkInput(fromId=b, toId=d, relationType=RelationType.RELATED), ctx)
    put(service, "bob keeps his own harbour notes", "bob")

    def found(scope: AgentScope, ids: list[str], relations: list[RelationType], limit: int) -> list[tuple[str, str, str, str]]:
        return [(link.from_id, link.to_id, link.relation_type.value, f.id) for link, f in store.neighbours(scope, ids, relations, limit)]

    every = found(A, [a, b], list(RelationType), 10)
    # a link with both ends asked comes once for each end's other side; links in creation order
    assert sorted(every[:2]) == sorted([(a, b, "caused_by", b), (a, b, "caused_by", a)])
    assert every[2:] == [(c, a, "related", c), (b, d, "related", d)]
    assert found(A, [a, b], [RelationType.RELATED], 10) == [(c, a, "related", c), (b, d, "related", d)]
    assert found(A, [d], list(RelationType), 10) == [(b, d, "related", b)]
    assert len(found(A, [a, b], list(RelationType), 1)) == 1
    assert found(B, [a, b], list(RelationType), 10) == []  # bob sees none of alice's memories


def test_a_delete_removes_the_ids_from_every_linked_to_that_names_them(service: MemoryService, store: Store) -> None:
    """The rows that refer to deleted memories are found through fragment_references (kept by
    triggers on every write of linked_to), in every namespace, and lose those ids and only those."""
    t1, t2 = put(service, "first target of links"), put(service, "second target of links")
    pool = put(service, "a pool memory others link to", "default")
    r1 = put(service, "refers to both targets", links=(t1, t2))
    r2 = put(service, "refers to the second target", links=(t2,))
    r3 = put(service, "bob refers to the pool memory", "bob", links=(pool,))
    r4 = put(service, "refers to the pool memory and the first target", links=(pool, t1))
    statements = traced_statements(store, lambda: store.delete(A, [t2]), writer=True)
    assert any("fragment_references" in s for s in statements), statements
    assert store.get_many(A, [r1])[0].linked_to == [t1] and store.get_many(A, [r2])[0].linked_to == []
    store.add_link(A, r2, t1, RelationType.RELATED, NOW)  # a link added later is found as well
    assert store.get_many(A, [r2])[0].linked_to == [t1]
    assert set(store.delete(SYSTEM, [pool, t1])) == {pool, t1}
    assert store.get_many(B, [r3])[0].linked_to == []  # another namespace's reference goes too
    assert [store.get_many(A, [r])[0].linked_to for r in (r1, r2, r4)] == [[], [], []]


def test_delete_find_by_topic_and_pool_rules(service: MemoryService, store: Store) -> None:
    a1 = put(service, "topic probe one", topic="probe")
    a2 = put(service, "topic probe two", topic="probe", links=(a1,))
    put(service, "topic probe for bob", "bob", topic="probe")
    assert {f.id for f in store.find_by_topic(A, "probe")} == {a1, a2}
    assert store.delete(B, [a1]) == []  # invisible to bob: untouched
    assert store.delete(A, [a1]) == [a1]
    assert store.get_many(A, [a2])[0].linked_to == []  # the deleted id leaves the arrays
    pool = put(service, "a shared pool fact", "default")
    reader = AgentScope("carol", PoolWrites.NONE)
    with pytest.raises(Forbidden):
        store.delete(reader, [pool])
    with pytest.raises(Forbidden):
        store.soft_delete(reader, [pool], NOW)
    assert store.get_many(reader, [pool])


def test_listings_pages_topics_prefixes_counts_and_rank_features(service: MemoryService, store: Store) -> None:
    ids = [put(service, f"listing probe number {i}", topic=f"t{i % 2}", created=NOW + timedelta(minutes=i)) for i in range(5)]
    put(service, "bob's listing probe", "bob", topic="t0")
    recent = store.recent(A, SearchFilter(), 3)
    assert [f.id for f in recent] == ids[::-1][:3]
    first = store.page(A, SearchFilter(), None, 2)
    second = store.page(A, SearchFilter(), first[-1].seq, 10)
    assert [f.id for f in first + second] == [f.id for f in sorted(first + second, key=lambda f: -f.seq)]
    assert {f.id for f in first + second} == set(ids)
    assert dict(store.topics(A, "t", 10)) == {"t0": 3, "t1": 2}
    assert set(store.ids_with_prefix(A, "frag-", 100)) == set(ids)
    assert store.ids_with_prefix(A, ids[0], 100) == [ids[0]]
    assert store.count(A, SearchFilter(topic="t0")) == 3 and store.count(B, SearchFilter()) == 1
    features = store.rank_features(A, ids[:2])
    assert set(features) == set(ids[:2]) and features[ids[1]].created_at > features[ids[0]].created_at
    assert [f.id for f in store.list_fragments(A, SearchFilter(topic="t1"), 10)] == [ids[3], ids[1]]


def test_working_memory_is_expunged_and_hidden_from_other_sessions(service: MemoryService, store: Store) -> None:
    note = put(service, "session scratch: try the replica", session="sess-1")
    put(service, "a permanent fact beside it")
    assert store.count(A, SearchFilter()) == 1
    assert [f.id for f in store.list_fragments(A, SearchFilter(session_id="sess-1", only_session=True), 10)] == [note]
    assert store.expunge_session("sess-1", "alice") == 1
    assert store.get_many(A, [note]) == []


def test_a_sessions_token_total_counts_its_live_unkeyed_working_memory_only(service: MemoryService, store: Store) -> None:
    first = put(service, "session scratch: try the replica first", session="s-tok")
    second = put(service, "session scratch: then the primary", session="s-tok")
    put(service, "a keyed note", session="s-tok", memory_key="k1")  # 002's keyed session memory: apart
    put(service, "bob's scratch under the same id", "bob", session="s-tok")
    put(service, "a permanent fact beside it")
    rows = store.get_many(A, [first, second])
    assert store.session_tokens("alice", "s-tok") == sum(f.estimated_tokens for f in rows) > 0
    store.soft_delete(A, [second], NOW)
    assert store.session_tokens("alice", "s-tok") == rows[0].estimated_tokens
    assert store.session_tokens("alice", "none") == 0 and store.session_tokens("carol", "s-tok") == 0


def test_the_three_retrieval_tiers_filter_and_isolate(service: MemoryService, store: Store) -> None:
    hit = put(service, "postgres vacuum runs nightly", tags=("db",))
    put(service, "postgres vacuum runs for bob too", "bob")
    other = put(service, "the frontend uses react", tags=("web",))
    keyword = store.keyword_search(A, ["postgres"], SearchFilter(), 10)
    text = store.text_search(A, query_terms("postgres vacuum"), SearchFilter(), 10)
    assert [h.id for h in keyword] == [hit] and [h.id for h in text] == [hit]
    assert store.text_search(A, query_terms("postgres vacuum"), SearchFilter(tags_all=("web",)), 10) == []
    assert service.embedder is not None
    vector = service.embedder.embed_query("postgres vacuum runs nightly")
    semantic = store.vector_search(A, vector, SearchFilter(), 10)
    assert semantic[0].id == hit and {h.id for h in semantic} <= {hit, other}
    assert [h.id for h in store.vector_search(A, vector, SearchFilter(tags_any=("web",)), 10)] == [other]


def test_access_is_recorded_and_flushed(service: MemoryService, store: Store) -> None:
    fid = put(service, "access probe")
    store.record_access([fid, fid], NOW + timedelta(hours=1))
    store.flush_access()
    fragment = store.get_many(A, [fid])[0]
    assert fragment.access_count == 2 and fragment.accessed_at == NOW + timedelta(hours=1)


def test_embeddings_are_set_and_backfilled(service: MemoryService, store: Store) -> None:
    fragment, _ = store.insert(A, NewFragment(new(service, "no vector yet").draft, "alice", None, None))
    assert not fragment.has_embedding
    missing = store.missing_embeddings(A, 10)
    assert [(row[1], row[2]) for row in missing] == [(fragment.id, fragment.content)]
    store.set_embedding(fragment.id, np.ones(service.embedder.dimensions, dtype=np.float32) if service.embedder else np.ones(4))
    assert store.missing_embeddings(A, 10) == [] and store.get_many(A, [fragment.id])[0].has_embedding


def test_feedback_and_stats(service: MemoryService, store: Store) -> None:
    put(service, "stats probe fact")
    put(service, "stats probe error", type_="error")
    put(service, "stats probe anchor", is_anchor=True)
    tool_id = store.add_tool_feedback(
        "alice",
        {
            "tool_name": "recall",
            "relevant": True,
            "sufficient": False,
            "suggestion": None,
            "context": None,
            "session_id": "s",
            "trigger_type": "voluntary",
        },
        NOW,
    )
    task_id = store.add_task_feedback(
        "alice", {"session_id": "s", "overall_success": True, "tool_highlights": ["a"], "tool_pain_points": []}, NOW
    )
    assert tool_id >= 1 and task_id >= 1
    put(service, "stats probe scratch", session="sess-stats")  # working memory: counted apart
    put(service, "bob's stats probe", "bob")
    store.soft_delete(A, [put(service, "stats probe deleted")], NOW)
    stats = store.stats(A)
    assert stats["total"] == 3 and stats["by_type"]["error"] == 1 and stats["anchors"] == 1  # type: ignore[index]
    assert stats["working_memory"] == 1 and stats["embedded"] == 3 and stats["embedding_coverage"] == 1.0
    assert set(stats) >= {"total", "working_memory", "by_tier", "by_type", "links", "embedded", "embedding_coverage"}


@pytest.mark.backends("sqlite")
def test_a_memory_pinned_while_a_stage_chooses_is_kept(service: MemoryService, app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lifecycle stage chooses its rows without the write lock; a pin committed between the
    choice and the write is seen (the choice is asked again inside the write's transaction)."""
    store: Store = app.store
    maintenance: MaintenanceStore = service.consolidator.maintenance
    old = NOW - timedelta(days=400)
    cold, unsure = put(service, "an old cold fact", created=old), put(service, "an old unsure fact", created=old)
    store.update(A, cold, FragmentChanges(ttl_tier=TTLTier.COLD), "alice", NOW)
    store.update(A, unsure, FragmentChanges(ttl_tier=TTLTier.WARM, confidence=0.01), "alice", NOW)
    db, reader = app.store.db, app.store.db.reader
    pinned: list[str] = []

    class Racing:  # the stage's reads, with another client's pin landing right after its choice
        def __init__(self, conn: Any) -> None:
            self.conn = conn

        def execute(self, sql: str, params: Any = ()) -> Any:
            if not sql.startswith("SELECT f.id FROM fragments f WHERE"):
                return self.conn.execute(sql, params)
            rows = self.conn.execute(sql, params).fetchall()
            for (fid,) in rows:
                store.update(A, fid, FragmentChanges(pinned=True), "alice", NOW)
                pinned.append(fid)
            return iter(rows)

    monkeypatch.setattr(db, "reader", lambda: Racing(reader()))
    assert maintenance.expire_cold(A, None, [], NOW - timedelta(days=90)) == []
    assert maintenance.prune_low_confidence(A, 0.05, 30.0, NOW + timedelta(days=1), archive=False) == []
    assert pinned == [cold, unsure] and {f.id for f in store.get_many(A, [cold, unsure])} == {cold, unsure}  # both kept


def test_maintenance_primitives(service: MemoryService, app: Any) -> None:
    store: Store = app.store
    maintenance: MaintenanceStore = service.consolidator.maintenance
    old = NOW - timedelta(days=400)
    hot = put(service, "an old hot error", type_="error", created=old, importance=0.6)
    cold = put(service, "an old cold fact", created=old, importance=None)
    store.update(A, cold, FragmentChanges(ttl_tier=TTLTier.COLD, importance=0.1), "alice", NOW)
    assert maintenance.demote(A, TTLTier.HOT, TTLTier.WARM, NOW - timedelta(days=30), None) == [hot]
    assert store.get_many(A, [hot])[0].ttl_tier is TTLTier.WARM
    assert maintenance.expire_cold(A, None, [], NOW - timedelta(days=90)) == [cold]
    assert store.get_many(A, [cold]) == []
    assert len(maintenance.recompute_utility(A, NOW, 30.0)) >= 1
    assert len(maintenance.decay_importance(A, 0.9, 100, 1.0, NOW)) >= 0
    assert maintenance.deduplicate(A) == [] and maintenance.prune_orphan_links(A) == []
    assert maintenance.contradictions(A) == []
    assert len(maintenance.expire_sessions(NOW + timedelta(days=1))) >= 0


def test_idle_sessions_are_the_ones_expire_sessions_removes(service: MemoryService, store: Store) -> None:
    maintenance: MaintenanceStore = service.consolidator.maintenance
    put(service, "an old note", session="old", created=NOW - timedelta(hours=3))
    put(service, "an older note", session="old", created=NOW - timedelta(hours=4))
    put(service, "bob's old note", "bob", session="old", created=NOW - timedelta(hours=5))
    put(service, "a fresh note", session="fresh", created=NOW)
    put(service, "a mixed session's old note", session="mixed", created=NOW - timedelta(hours=5))
    put(service, "a mixed session's new note", session="mixed", created=NOW)
    idle = maintenance.idle_sessions(NOW - timedelta(hours=1))
    assert sorted(idle) == [("alice", "old"), ("bob", "old")]
    assert len(maintenance.expire_sessions(NOW - timedelta(hours=1))) == 3
    assert maintenance.idle_sessions(NOW - timedelta(hours=1)) == []
    assert len(store.list_fragments(A, SearchFilter(session_id="mixed", only_session=True), 10)) == 2


def test_a_stale_scope_size_is_counted_again_off_the_callers_path(service: MemoryService, store: Store) -> None:
    """A scope's size (the term policy's magnitude) counts every live row it sees, ~0.1-0.2 s at a
    million: once kept, it is counted again on the store's refresher thread when stale, and the
    caller goes on with the old value instead of waiting."""
    for i in range(3):
        put(service, f"alice kept note {i}")
    put(service, "bob's own note", "bob")  # another agent present: alice's scope is not the store
    now = [0.0]
    search = store.search  # type: ignore[attr-defined]
    sizes: CountCache[int] = CountCache(clock=lambda: now[0], refresher=search.refresher)
    search.sizes = sizes
    key = A.visible_agents()
    store.keyword_search(A, ["kept"], SearchFilter(), 5)  # the first count, on the caller
    assert sizes.peek(key) == 3
    for i in range(2):
        put(service, f"alice later note {i}")
    now[0] = COUNT_TTL_S + 1
    release = threading.Event()
    assert search.refresher.submit("hold", lambda: release.wait(30))  # the refresher busy: a count would wait
    hits = store.keyword_search(A, ["kept"], SearchFilter(), 5)  # returns at once, with the stale size
    assert len(hits) == 3 and sizes.peek(key) == 3
    store.keyword_search(A, ["kept"], SearchFilter(), 5)  # one refresh queued per key, not one per call
    release.set()
    assert search.refresher.idle(30)
    assert sizes.peek(key) == 5


def test_a_stale_frequent_term_count_is_counted_again_off_the_callers_path(service: MemoryService, store: Store) -> None:
    """A term in many of a scope's memories is counted up to a cap for its weight, which reads
    its postings (milliseconds at a million): kept for minutes, then, once stale, still used while
    the store's refresher counts it again, so no recall waits for the count."""
    contents = [f"{'weather' if i % 21 == 0 else 'plain'} note {i}" for i in range(COMMON_TERM_MIN_DOCS + 100)]
    import_fragments(service, "alice", contents)  # "weather" in 100 of 2,100: frequent, under its cap
    put(service, "bob's own note", "bob")  # another agent present: alice's scope is counted within it
    search = store.search  # type: ignore[attr-defined]
    now = [0.0]
    search.frequent = FrequentCounts(search.refresher, clock=lambda: now[0])
    assert store.text_search(A, query_terms("weather note"), SearchFilter(), 5)
    assert list(search.frequent.peek("weather").values()) == [100]  # alice's scope, counted on the caller
    import_fragments(service, "alice", [f"weather later {i}" for i in range(50)], first=10_000)
    now[0] = 301.0
    release = threading.Event()
    assert search.refresher.submit("hold", lambda: release.wait(30))  # the refresher busy: a count would wait
    assert store.text_search(A, query_terms("weather note"), SearchFilter(), 5)  # at once, the stale count
    assert list(search.frequent.peek("weather").values()) == [100]
    release.set()
    assert search.refresher.idle(30)
    assert list(search.frequent.peek("weather").values()) == [150]


def test_another_agents_data_does_not_change_your_terms_or_ranking(service: MemoryService, store: Store) -> None:
    """The common-term policy counts within the caller's scope on both backends: a flood of
    another agent's fragments that all say "alice" must not drop "alice" from bob's query."""
    both = put(service, "alice planted the garden roses", "bob")
    one = put(service, "alice repainted the old fence", "bob")
    put(service, "the weather was rainy all week", "bob")
    terms = query_terms("alice garden")
    before = [h.id for h in store.text_search(B, terms, SearchFilter(), 10)]
    recalled = [f.id for f in service.recall(RecallInput(text="alice garden", agentId="bob"), CallContext()).fragments]
    assert before == [both, one]
    flood = COMMON_TERM_MIN_DOCS + 200
    rows: list[dict[str, object]] = [
        {
            "id": f"frag-flood{i:06d}",
            "content": f"alice note {i}",
            "topic": "flood",
            "keywords": ["alice"],
            "type": "fact",
            "importance": 0.5,
            "content_hash": f"flood{i:011d}",
            "source": None,
            "linked_to": [],
            "agent_id": "mallory",
            "access_count": 0,
            "accessed_at": None,
            "created_at": NOW,
            "ttl_tier": "warm",
            "estimated_tokens": 3,
            "utility_score": 1.0,
            "verified_at": NOW,
            "is_anchor": False,
            "session_id": None,
            "embedding": None,
            "embedding_model": None,
        }
        for i in range(flood)
    ]
    for start in range(0, flood, 500):
        service.store.import_rows("fragments", rows[start : start + 500])  # type: ignore[attr-defined]
    assert store.count(AgentScope("mallory"), SearchFilter()) == flood
    assert [h.id for h in store.text_search(B, terms, SearchFilter(), 10)] == before
    again = [f.id for f in service.recall(RecallInput(text="alice garden", agentId="bob"), CallContext()).fragments]
    assert again == recalled
    # within mallory's own scope "alice" is common, and is dropped while "note" is rarer... not here:
    # every flood row says "note" too, so both are common and the two rarest are kept
    assert store.text_search(AgentScope("mallory"), query_terms("alice note"), SearchFilter(), 5)


def import_fragments(
    service: MemoryService,
    agent: str,
    contents: list[str],
    first: int = 0,
    keywords: list[list[str]] | None = None,
    importance: list[float] | None = None,
) -> None:
    """Bulk rows (the import path, 500 per call) straight into `agent`'s namespace (ids and
    hashes numbered from `first`; each row's keywords and importance when given)."""
    rows: list[dict[str, object]] = [
        {
            "id": f"frag-bulk{i:06d}",
            "content": content,
            "topic": "bulk",
            "keywords": keywords[i - first] if keywords else [],
            "type": "fact",
            "importance": importance[i - first] if importance else 0.5,
            "content_hash": f"bulk{i:012d}",
            "source": None,
            "linked_to": [],
            "agent_id": agent,
            "access_count": 0,
            "accessed_at": None,
            "created_at": NOW,
            "ttl_tier": "warm",
            "estimated_tokens": 8,
            "utility_score": 1.0,
            "verified_at": NOW,
            "is_anchor": False,
            "session_id": None,
            "embedding": None,
            "embedding_model": None,
        }
        for i, content in enumerate(contents, first)
    ]
    for start in range(0, len(rows), 500):
        service.store.import_rows("fragments", rows[start : start + 500])  # type: ignore[attr-defined]


def test_a_longer_turn_with_more_of_the_query_outranks_a_short_one_sharing_one_word(service: MemoryService, store: Store) -> None:
    """Full text is not ranked by length first: the short "Pottery is fun!" holds one query term,
    the long turn holds both, and it comes first (FTS5's bm25 alone put the short one first)."""
    short = put(service, "Pottery is fun!")
    answer = put(
        service, "I finally signed up for a class at the studio downtown: wheel pottery, every Tuesday evening after work with my sister"
    )
    for i in range(3):
        put(service, f"the yoga class {i} was cancelled again this week, so we went for a long walk by the river instead and talked")
    for i in range(10):
        put(service, f"we went for a long walk by the river {i} and talked about the garden and the new neighbours")
    hits = [h.id for h in store.text_search(A, query_terms("pottery class"), SearchFilter(), 5)]
    assert hits[:2] == [answer, short]


def test_a_count_may_stop_at_a_bound(service: MemoryService, store: Store) -> None:
    """recall's listing only asks which side of a threshold a scope's count lies: it stops there."""
    for i in range(5):
        put(service, f"counted note {i}")
    put(service, "another agent's note", "bob")
    assert store.count(A, SearchFilter()) == 5
    assert store.count(A, SearchFilter(), at_most=3) == 3
    assert store.count(A, SearchFilter(), at_most=10) == 5


def test_a_listing_merges_each_namespaces_first_rows_in_order(service: MemoryService, store: Store) -> None:
    """A listing (recall without a question) over a namespace and the shared pool: anchors, then
    importance, then the newest, as one order across both; private pool rows, other agents' rows
    and deleted rows never appear. Each namespace is walked on its own, through an index in that
    order (migration 0027: `agent_id = ?`, where `agent_id IN (...)` read every row and sorted)."""
    own = [put(service, f"own listing row {i}", importance=0.1 * (i % 7), created=NOW + timedelta(minutes=i)) for i in range(14)]
    anchor = put(service, "own anchor row", importance=0.2, is_anchor=True)
    pooled = [
        put(service, f"pool listing row {i}", "default", importance=0.15 + 0.1 * i, created=NOW + timedelta(minutes=i)) for i in range(5)
    ]
    put(service, "a private pool row", "default", importance=0.99, privacy_scope=PrivacyScope.PRIVATE)
    put(service, "bob's important row", "bob", importance=0.99)
    gone = put(service, "an own row deleted later", importance=0.98)
    store.soft_delete(A, [gone], NOW)
    every = store.get_many(A, [*own, anchor, *pooled])
    expected = sorted(every, key=lambda f: (not f.is_anchor, -f.importance, -f.created_at.timestamp()))
    for limit in (1, 4, 8, 30):
        listed = store.list_fragments(A, SearchFilter(), limit)
        assert [f.id for f in listed] == [f.id for f in expected[:limit]]
    newest = sorted(every, key=lambda f: -f.created_at.timestamp())
    assert [f.id for f in store.recent(A, SearchFilter(), 6)] == [f.id for f in newest[:6]]
    assert [f.id for f in store.list_fragments(A, SearchFilter(topic="general"), 3)] == [f.id for f in expected[:3]]
    assert store.list_fragments(A, SearchFilter(topic="none such"), 3) == []
    assert store.list_fragments(B, SearchFilter(), 30)[0].content == "bob's important row"
    for listing in (lambda: store.list_fragments(A, SearchFilter(), 5), lambda: store.page(A, SearchFilter(), None, 5)):
        statements = traced_statements(store, listing)
        assert any(
            "agent_id = " in s.replace("f.agent_id = ?", "agent_id = ").replace("f.agent_id = %s", "agent_id = ") and "UNION ALL" in s
            for s in statements
        ), statements
    by_seq = sorted(every, key=lambda f: -f.seq)
    assert [f.id for f in store.page(A, SearchFilter(), None, 7)] == [f.id for f in by_seq[:7]]
    assert [f.id for f in store.page(A, SearchFilter(), by_seq[6].seq, 7)] == [f.id for f in by_seq[7:14]]


def test_a_filtered_listing_is_exact_whether_its_bounded_walk_meets_the_filter_or_not(
    service: MemoryService, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing with a filter that narrows more than a topic walks each namespace's index in its
    order a bounded way (here 6 rows) and answers from the walk when the walk holds enough rows
    that pass, or sorts the filter's rows when it does not. Either way the answer is the first
    rows in order across the namespace and the pool: the pool's matching row sits past its own
    walk (behind six important ones that do not match) and still outranks alice's."""
    monkeypatch.setattr(sqlfilter, "LISTING_WALK_MIN", 6)
    monkeypatch.setattr(sqlfilter, "LISTING_WALK_PER_ROW", 1)
    kinds = ["fact", "fact", "fact", "decision", "fact", "fact", "fact", "fact", "procedure", "fact"]
    for i in range(30):
        put(service, f"own filtered row {i}", type_=kinds[i % 10], importance=0.3 + 0.02 * (i % 9), created=NOW + timedelta(hours=i))
    for i in range(6):
        put(service, f"pool important fact {i}", "default", importance=0.95, created=NOW + timedelta(hours=40 + i))
    put(service, "pool decision past its walk", "default", type_="decision", importance=0.9, created=NOW - timedelta(days=3))
    put(service, "bob's decision", "bob", type_="decision", importance=0.99)
    gone = put(service, "an own decision deleted later", type_="decision", importance=0.97)
    store.soft_delete(A, [gone], NOW)
    every = store.list_fragments(A, SearchFilter(), 100)
    assert len(every) == 37
    in_order = sorted(every, key=lambda f: (not f.is_anchor, -f.importance, -f.created_at.timestamp()))
    newest = sorted(every, key=lambda f: -f.created_at.timestamp())
    filters = [
        SearchFilter(type=FragmentType.FACT),
        SearchFilter(type=FragmentType.DECISION),
        SearchFilter(types=(FragmentType.DECISION, FragmentType.PROCEDURE)),
        SearchFilter(created_after=NOW + timedelta(hours=20)),
        SearchFilter(created_before=NOW + timedelta(hours=5)),
        SearchFilter(topic="general", type=FragmentType.PROCEDURE),
        SearchFilter(topic="elsewhere", type=FragmentType.FACT),
    ]
    for filt in filters:
        for limit in (1, 3, 8, 40):
            listed = store.list_fragments(A, filt, limit)
            assert [f.id for f in listed] == [f.id for f in in_order if filt.matches(f)][:limit], (filt, limit)
            recent = store.recent(A, filt, limit)
            assert [f.id for f in recent] == [f.id for f in newest if filt.matches(f)][:limit], (filt, limit)
    by_seq = sorted(every, key=lambda f: -f.seq)
    for filt in [SearchFilter(), SearchFilter(topic="general"), *filters]:  # keyset pages, newest inserted first
        paged, before = [], None
        while page := store.page(A, filt, before, 4):
            paged += [f.id for f in page]
            before = page[-1].seq
        assert paged == [f.id for f in by_seq if filt.matches(f)], filt
    assert store.list_fragments(A, SearchFilter(type=FragmentType.DECISION), 1)[0].content == "pool decision past its walk"
    # Facts fill the walk: it answers. Decisions do not: alice's walk falls short and the rows
    # that pass are sorted over the scope instead.
    walked = traced_statements(store, lambda: store.list_fragments(A, SearchFilter(type=FragmentType.FACT), 3))
    sorted_ = traced_statements(store, lambda: store.list_fragments(A, SearchFilter(type=FragmentType.DECISION), 3))
    assert any("fragments w " in s for s in walked) and not any(_sorted_over_the_scope(s) for s in walked), walked
    assert any("fragments w " in s for s in sorted_) and any(_sorted_over_the_scope(s) for s in sorted_), sorted_


def test_tag_and_pin_filters_are_exact_whether_few_or_many_memories_carry_them(
    service: MemoryService, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tag filter over a count, a listing, a sort of the filter's rows, the text and vector
    tiers: the same rows as SearchFilter.matches, whether the tag is carried by few memories (on
    SQLite the set of them, from fragment_tags) or by many (tested row by row); tags changed by an
    update, a deleted memory's and another agent's never leak in. Pinned likewise."""
    monkeypatch.setattr(sqlfilter, "FEW_TAGGED", 5)  # "rare" (4 memories, any agent) is few; "team" (31) many
    monkeypatch.setattr(sqlfilter, "LISTING_WALK_MIN", 6)
    monkeypatch.setattr(sqlfilter, "LISTING_WALK_PER_ROW", 1)
    ids = []
    for i in range(30):
        tags = ("team", "rare") if i in (4, 17) else ("team",) if i % 5 else ("solo",)
        ids.append(
            put(service, f"tagged note number {i} about the deploy", tags=tags, pinned=i in (3, 22), created=NOW + timedelta(hours=i))
        )
    retagged = put(service, "a note whose tags change later about the deploy", tags=("solo",), created=NOW - timedelta(days=1))
    store.update(A, retagged, FragmentChanges(tags=("team", "rare"), pinned=True), "alice", NOW)
    store.update(A, ids[4], FragmentChanges(tags=("team",)), "alice", NOW)  # loses "rare"
    dropped = put(service, "a tagged note deleted later about the deploy", tags=("team", "rare"), pinned=True)
    store.delete(A, [dropped])
    put(service, "bob's rare note about the deploy", "bob", tags=("team", "rare"), pinned=True)
    put(
        service, "the pool's rare note about the deploy", "default", tags=("rare", "team"), importance=0.9, created=NOW - timedelta(hours=2)
    )
    every = store.list_fragments(A, SearchFilter(), 100)
    assert len(every) == 32
    in_order = sorted(every, key=lambda f: (not f.is_anchor, -f.importance, -f.created_at.timestamp()))
    newest = sorted(every, key=lambda f: -f.created_at.timestamp())
    filters = [
        SearchFilter(tags_all=("rare",)),
        SearchFilter(tags_all=("team",)),
        SearchFilter(tags_all=("team", "rare")),
        SearchFilter(tags_all=("absent",)),
        SearchFilter(tags_any=("rare", "solo")),
        SearchFilter(tags_any=("rare", "absent")),
        SearchFilter(tags_any=("team", "solo")),
        SearchFilter(pinned=True),
        SearchFilter(pinned=False),
        SearchFilter(pinned=True, tags_all=("team",)),
        SearchFilter(pinned=False, tags_any=("rare",)),
    ]
    assert service.embedder is not None
    vector = service.embedder.embed_query("the deploy")
    for filt in filters:
        expected = [f for f in in_order if filt.matches(f)]
        assert store.count(A, filt) == len(expected), filt
        for limit in (1, 3, 40):
            assert [f.id for f in store.list_fragments(A, filt, limit)] == [f.id for f in expected][:limit], (filt, limit)
            assert [f.id for f in store.recent(A, filt, limit)] == [f.id for f in newest if filt.matches(f)][:limit], (filt, limit)
        found = {h.id for h in store.text_search(A, query_terms("deploy note"), filt, 50)}
        assert found == {f.id for f in expected}, filt
        assert {h.id for h in store.vector_search(A, vector, filt, 50)} == {f.id for f in expected}, filt
    rare = {f.id for f in every if "rare" in f.tags}
    assert rare == {ids[17], retagged, *(f.id for f in every if f.agent_id == "default")} and len(rare) == 3
    # The rare tag is the set of its memories from fragment_tags (SQLite: `IN`; PostgreSQL: the
    # array of their seqs); the common one is tested on each row.
    few = traced_statements(store, lambda: store.count(A, SearchFilter(tags_all=("rare",))))
    many = traced_statements(store, lambda: store.count(A, SearchFilter(tags_all=("team",))))
    assert not any("fragment_tags t" in s for s in many), many
    if hasattr(store.db, "reader"):  # type: ignore[attr-defined]
        assert any("f.seq IN (SELECT t.seq FROM fragment_tags t" in s for s in few), few
        assert any("json_each(f.tags)" in s for s in many), many
    else:
        assert any("f.seq = ANY(ARRAY(SELECT t.seq FROM agent_memory.fragment_tags t" in s for s in few), few
        assert any("f.tags @> " in s for s in many), many


def _sorted_over_the_scope(statement: str) -> bool:
    """A filtered listing's statement that sorts the rows that pass over the scope (not a walk,
    not the read of the rows the walks chose)."""
    if "fragments w " in statement or statement.startswith("SELECT set_config"):
        return False
    return "ORDER BY +f." in statement or ("agent_memory.fragments f" in statement and "f.seq = ANY(" not in statement)


def test_keywords_rank_by_rarity_not_recency(service: MemoryService, store: Store) -> None:
    """One matched rare keyword outweighs one matched common keyword, however new the latter."""
    rare = put(service, "kubernetes upgrade notes", created=NOW - timedelta(days=30))
    common = [put(service, f"project meeting number {i} agenda", created=NOW - timedelta(days=i)) for i in range(5)]
    hits = store.keyword_search(A, ["project", "kubernetes"], SearchFilter(), 10)
    assert hits[0].id == rare and {h.id for h in hits[1:]} == set(common)
    assert hits[0].score > hits[1].score
    # the common ones tie: by id, not by age
    assert [h.id for h in hits[1:]] == sorted(common)
    # a fragment matching both keywords comes first: scores add up
    both = put(service, "project kubernetes migration plan", created=NOW - timedelta(days=60))
    assert store.keyword_search(A, ["project", "kubernetes"], SearchFilter(), 10)[0].id == both


def test_in_a_large_scope_a_common_keyword_only_scores_what_the_rarer_ones_select(service: MemoryService, store: Store) -> None:
    """Above COMMON_TERM_MIN_DOCS the keyword tier follows the full-text tier's policy: a keyword
    held by most of the scope brings in no candidates of its own (ranking all its holders cost
    1.6 s at a million); it still adds its weight to those the rare keyword finds."""
    n = COMMON_TERM_MIN_DOCS + 100
    kws = [["status", "zebra"] if i < 3 else ["zebra"] if i < 5 else ["status"] for i in range(n)]
    import_fragments(service, "alice", [f"weekly status note {i}" for i in range(n)], keywords=kws)
    hits = store.keyword_search(A, ["zebra", "status"], SearchFilter(), 10)
    ids = [h.id for h in hits]
    assert len(ids) == 5  # the rare keyword's five holders; the common keyword's alone are not candidates
    assert set(ids[:3]) == {f"frag-bulk{i:06d}" for i in range(3)}  # holding both: both weigh
    assert hits[2].score > hits[3].score
    # A keyword in every memory, alone: still answered (the two rarest always select).
    assert len(store.keyword_search(A, ["status"], SearchFilter(), 10)) == 10


def test_a_keyword_past_the_postings_budget_ranks_its_newest_matches(service: MemoryService, store: Store) -> None:
    """When even the rarest keyword matches more memories than the postings budget, only its
    newest matches are ranked (a walk of the keyword's entries that stops), as the full-text tier
    does: the work stays bounded however large the store grows."""
    n = COMMON_TERM_MIN_DOCS + 100
    weights = [0.99 if i == 0 else 0.5 for i in range(n)]  # the oldest is the most important
    import_fragments(service, "alice", [f"release checklist item {i}" for i in range(n)], keywords=[["release"]] * n, importance=weights)
    search = store.search  # type: ignore[attr-defined]
    search.scoring = replace(search.scoring, postings=10_000)  # a budget above the matches: every one ranked
    assert store.keyword_search(A, ["release"], SearchFilter(), 3)[0].id == "frag-bulk000000"
    search.scoring = replace(search.scoring, postings=50)
    newest = {f"frag-bulk{i:06d}" for i in range(n - 50, n)}
    hits = store.keyword_search(A, ["release"], SearchFilter(), 10)
    assert len(hits) == 10 and {h.id for h in hits} <= newest


def test_a_name_common_in_a_large_store_still_decides_between_memories(service: MemoryService, store: Store) -> None:
    """Above COMMON_TERM_MIN_DOCS a name in a fifth of the store is common: it selects no
    candidates, but it still scores those the rarer terms find, so Alice's answer beats Bob's
    shorter one that says the same (dropping the name ranked Bob's first)."""
    names = ["Alice", "Bob", "Carol", "Dave", "Erin"]
    import_fragments(service, "alice", [f"{names[i % 5]}: the weather on day {i} was mild" for i in range(COMMON_TERM_MIN_DOCS + 100)])
    bob = put(service, "Bob: my mother lives in Lisbon")
    answer = put(service, "Alice: my mother lives in Lisbon now, in a small flat near the river")
    terms = query_terms("Where does Alice's mother live?")
    assert [h.id for h in store.text_search(A, terms, SearchFilter(), 5)][:2] == [answer, bob]
    # every term common: the two rarest still select, the others score
    assert store.text_search(A, query_terms("Alice weather day"), SearchFilter(), 3)


def test_a_rare_term_s_matches_holding_a_common_term_as_well_come_first(service: MemoryService, store: Store) -> None:
    """More matches of the rare term than the rescoring pool: those that also hold a common term
    (a name in a fifth of the store) are candidates before stronger matches of the rare term
    alone, within the scope and the filter, whatever their own rank by the rare term."""
    search = store.search  # type: ignore[attr-defined]
    search.scoring = dataclasses.replace(search.scoring, pool=10)
    names = ["Alice", "Bob", "Carol", "Dave", "Erin"]
    import_fragments(service, "alice", [f"{names[i % 5]}: the weather on day {i} was mild" for i in range(COMMON_TERM_MIN_DOCS + 100)])
    strong = [put(service, f"zanzibar zanzibar zanzibar lighthouse report {i}", tags=("trip",) if i < 2 else ()) for i in range(30)]
    long_tail = "with a great many other words about the harbour, the ferries, the markets and the weather of that week"
    alices = [put(service, f"Alice: we once went to zanzibar {long_tail}, number {i}", tags=("trip",) if i == 0 else ()) for i in range(3)]
    put(service, f"Alice: bob's own zanzibar note {long_tail}", "bob")
    terms = query_terms("zanzibar alice")
    hits = [h.id for h in store.text_search(A, terms, SearchFilter(), 5)]
    assert set(hits[:3]) == set(alices) and set(hits[3:]) <= set(strong)
    search.scoring = dataclasses.replace(search.scoring, common_terms="drop")  # the name not weighed: the strong ones win
    assert not {h.id for h in store.text_search(A, terms, SearchFilter(), 5)} & set(alices)
    search.scoring = dataclasses.replace(search.scoring, common_terms="score")
    # a filter that leaves few of the first matches: every match is read, the name's first
    filtered = [h.id for h in store.text_search(A, terms, SearchFilter(tags_all=("trip",)), 5)]
    assert filtered[0] == alices[0] and sorted(filtered) == sorted([alices[0], *strong[:2]])


def test_the_full_text_tier_ranks_a_bounded_number_of_matches(service: MemoryService, store: Store) -> None:
    """With a postings budget: a rare term finds its memory however old; when even the rarest
    term matches more than the budget, only its newest matches are ranked (the same on both
    backends), so the cost stays bounded as the store grows."""
    search = store.search  # type: ignore[attr-defined]
    search.scoring = dataclasses.replace(search.scoring, postings=500)
    contents = ["the weather at the zanzibar lighthouse was mild"]
    contents += [f"day {i}: the weather was mild and the harbour quiet" for i in range(COMMON_TERM_MIN_DOCS + 100)]
    import_fragments(service, "alice", contents)
    oldest = "frag-bulk000000"
    assert store.text_search(A, query_terms("zanzibar weather"), SearchFilter(), 5)[0].id == oldest
    hits = store.text_search(A, query_terms("mild weather"), SearchFilter(), 50)
    newest = {f"frag-bulk{i:06d}" for i in range(len(contents) - 500, len(contents))}
    assert len(hits) == 50 and {h.id for h in hits} <= newest
    search.scoring = dataclasses.replace(search.scoring, postings=len(contents) + 1)  # no bound: any match may rank
    assert store.text_search(A, query_terms("mild weather"), SearchFilter(), 5)


def test_consolidation_reads_settled_access_statistics(service: MemoryService, store: Store) -> None:
    """An access recorded just before a consolidation run is written before any stage reads it."""
    fid = put(service, "the index rebuild takes four minutes", "default")
    assert service.recall(RecallInput(text="index rebuild"), CallContext()).fragments[0].id == fid
    service.consolidator.run(AgentScope("system"))
    assert store.get_many(SYSTEM, [fid])[0].access_count == 1


# ---------------------------------------------------------------- the shared batching policy


def _until(condition: Any, timeout_s: float = 10.0) -> bool:
    import time

    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)  # polling a background thread's effect, with a deadline
    return True


@pytest.mark.backends("sqlite")
def test_the_access_buffer_writes_in_the_background_and_keeps_what_it_could_not_write() -> None:
    from memento.storage.access import ACCESS_FLUSH_SIZE, AccessBuffer, Pending

    written: list[Pending] = []
    locked = {"frag-locked"}

    def write(batch: Pending) -> Pending:
        written.append(dict(batch))
        return {fid: batch[fid] for fid in batch if fid in locked}

    buffer = AccessBuffer(write, interval_s=0.05)
    buffer.record(["frag-a", "frag-a", "frag-locked"], NOW)
    assert _until(lambda: bool(written)), "recalls stopped: the pending counts were never written"
    assert written[0]["frag-a"] == (2, NOW)
    assert _until(lambda: buffer.pending() == 1)  # the locked row waits for the next batch
    locked.clear()
    buffer.record(["frag-locked"], NOW + timedelta(seconds=1))
    buffer.flush()
    assert buffer.pending() == 0 and written[-1]["frag-locked"] == (2, NOW + timedelta(seconds=1))
    buffer.close()

    failures: list[Pending] = []

    def broken(batch: Pending) -> Pending:
        failures.append(batch)
        raise RuntimeError("database away")

    keeping = AccessBuffer(broken, interval_s=3600)
    keeping.record([f"frag-{i}" for i in range(ACCESS_FLUSH_SIZE)], NOW)  # a full batch wakes the writer
    assert _until(lambda: bool(failures))
    assert keeping.pending() == ACCESS_FLUSH_SIZE  # a failed write loses no count
    with pytest.raises(RuntimeError):
        keeping.close()


def test_the_capabilities_every_backend_provides(service: MemoryService, app: Any) -> None:
    """App holds an AppStore: ping, size summary, reindexing, feedback reads and the migration log."""
    from memento.storage.protocol import AppStore

    store: AppStore = app.store
    store.ping()
    put(service, "capability probe", type_="error", importance=0.6)
    put(service, "capability scratch", "bob", session="sess-cap")
    summary = store.size_summary()
    assert summary["working_memory"] == 1 and summary["agents"] == 2 and sum(summary["by_tier"].values()) == 1
    assert store.clear_embeddings() == 2 and store.missing_embeddings(A, 10)
    fid = store.add_tool_feedback(
        "alice",
        {
            "tool_name": "recall",
            "relevant": False,
            "sufficient": True,
            "suggestion": "x",
            "context": None,
            "session_id": None,
            "trigger_type": "sampled",
        },
        NOW,
    )
    row = store.tool_feedback(fid)
    assert row is not None and (row["tool_name"], row["relevant"], row["sufficient"], row["trigger_type"]) == (
        "recall",
        False,
        True,
        "sampled",
    )
    assert store.tool_feedback(fid + 1000) is None
    store.add_task_feedback(
        "alice", {"session_id": "s-cap", "overall_success": False, "tool_highlights": [], "tool_pain_points": ["slow"]}, NOW
    )
    assert [r["tool_pain_points"] for r in store.task_feedback("s-cap")] == [["slow"]]
    assert "0004_shared_record.sql" in store.migrations()


def test_soft_deleted_rows_are_purged_after_the_retention_and_not_before(service: MemoryService, app: Any) -> None:
    store: Store = app.store
    maintenance: MaintenanceStore = service.consolidator.maintenance
    old, fresh, theirs = put(service, "hidden long ago"), put(service, "hidden just now"), put(service, "bob's, hidden long ago", "bob")
    store.soft_delete(A, [old], NOW - timedelta(days=40))
    store.soft_delete(A, [fresh], NOW)
    store.soft_delete(B, [theirs], NOW - timedelta(days=40))
    assert maintenance.purge_forgotten(A, NOW - timedelta(days=30)) == [old]
    assert store.restore(A, [old]) == []  # gone for good
    assert store.restore(A, [fresh]) == [fresh]
    assert store.restore(B, [theirs]) == [theirs]  # alice's run never touches bob's rows


def test_erasure_targets_erase_receipts_and_what_is_left(service: MemoryService, app: Any) -> None:
    from memento.storage.protocol import AppStore, StoredReceipt, VersionRecord

    store: AppStore = app.store
    fid = put(service, "erase me with every trace")
    other = put(service, "points at the erased one", links=(fid,))
    store.add_version(A, fid, VersionRecord("an earlier text", "general", (), FragmentType.FACT, 0.5, "alice"), NOW)
    assert store.get_many(A, [fid])[0].has_embedding
    store.soft_delete(A, [fid], NOW)  # a hidden memory is erased all the same; hiding it dropped its vector
    assert store.erasure_targets(B, [fid]).fragments == ()  # bob does not see it
    targets = store.erasure_targets(A, [fid])
    assert targets.ids == [fid] and [v.content for v in targets.versions] == ["an earlier text"]
    seq = targets.fragments[0].seq
    counts = store.erase(A, targets)
    assert (counts["row"], counts["versions"], counts["vectors"]) == (1, 1, 0) and counts["links"] >= 2 and counts["fullText"] >= 1
    assert store.get_many(A, [other])[0].linked_to == [] and store.neighbours(A, [other], list(RelationType), 10) == []
    assert isinstance(store.scrub(["alice"]), dict)
    receipt = StoredReceipt("erasure-contract", "alice", NOW, '{"receiptId":"erasure-contract"}', "sha256:0", ("0123456789abcdef",), (seq,))
    store.save_receipt(receipt)
    assert store.get_receipt(A, "erasure-contract") == receipt
    assert store.get_receipt(B, "erasure-contract") is None and store.get_receipt(SYSTEM, "erasure-contract") == receipt
    assert store.erased_hashes("alice") == {"0123456789abcdef"} and store.erased_hashes("bob") == set()
    assert set(store.erasure_residue(A, receipt, [fid]).values()) == {0}
    again = put(service, "erase me with every trace")  # the same text stored again: its hash is found
    assert (
        store.erasure_residue(A, replace(receipt, content_hashes=(store.get_many(A, [again])[0].content_hash,)), [fid])["contentHashes"]
        == 1
    )


def test_feedback_rows_are_the_callers_and_need_a_fragment_it_sees(service: MemoryService, store: Store) -> None:
    mine = put(service, "the release train leaves on thursdays")
    pooled = put(service, "deploys freeze on fridays", "default")
    bobs = put(service, "bob keeps his notes in the attic", "bob")
    first = store.add_feedback(A, NewFeedback(mine, FeedbackEvent.HELPFUL, 0.5), NOW)
    second = store.add_feedback(A, NewFeedback(mine, FeedbackEvent.HELPFUL, 1.0, "the 9:40 one", "s-1"), NOW)
    store.add_feedback(A, NewFeedback(mine, FeedbackEvent.NOT_HELPFUL), NOW)
    assert second > first
    store.add_feedback(A, NewFeedback(pooled, FeedbackEvent.USED), NOW)  # a pool memory A sees
    store.add_feedback(B, NewFeedback(pooled, FeedbackEvent.NOT_HELPFUL), NOW)
    for scope, target in ((A, bobs), (A, "frag-missing"), (B, mine)):
        with pytest.raises(NotFound):
            store.add_feedback(scope, NewFeedback(target, FeedbackEvent.HELPFUL), NOW)
    tallies = store.feedback_tallies(A, [mine, pooled, bobs, "frag-missing"])
    assert set(tallies) == {mine, pooled}
    assert tallies[mine].counts == {"helpful": 2, "not_helpful": 1} and tallies[mine].scores["helpful"] == pytest.approx(1.5)
    assert tallies[pooled].counts == {"used": 1}  # bob's row on the same memory stays bob's
    assert store.feedback_counts(A) == {"helpful": 2, "not_helpful": 1, "used": 1}
    assert store.feedback_counts(B) == {"not_helpful": 1}
    assert store.feedback_counts(SYSTEM) == {"helpful": 2, "not_helpful": 2, "used": 1}  # maintenance: every agent's
    store.soft_delete(A, [mine], NOW)
    assert store.feedback_tallies(A, [mine]) == {} and "helpful" not in store.feedback_counts(A)  # hidden with its memory
    store.restore(A, [mine])
    assert store.feedback_tallies(A, [mine])[mine].counts["helpful"] == 2  # and back with it
    store.delete(A, [mine])
    assert store.feedback_counts(SYSTEM) == {"not_helpful": 1, "used": 1}  # deleted with it


def test_embeddings_of_gives_the_stored_vectors_of_visible_fragments(service: MemoryService, store: Store) -> None:
    mine = put(service, "vectors for the duplicate check")
    bobs = put(service, "bob's own vector", "bob")
    got = store.embeddings_of(A, [mine, bobs, "frag-missing"])
    assert list(got) == [mine]
    assert service.embedder is not None
    expected = service.embedder.embed_passages([store.get_many(A, [mine])[0].content])[0]
    np.testing.assert_allclose(got[mine], expected, rtol=1e-6)
    assert store.embeddings_of(A, []) == {}


def test_recent_embeddings_are_the_newest_visible_vectors_without_working_or_keyed_memory(service: MemoryService, store: Store) -> None:
    older = put(service, "an older note with a vector", created=NOW - timedelta(days=2))
    newer = put(service, "a newer note with a vector", created=NOW - timedelta(days=1))
    put(service, "a keyed note", memory_key="k1")
    put(service, "bob's note", "bob")
    got = store.recent_embeddings(A, 10)
    assert [fid for fid, _ in got] == [newer, older]  # newest first; keyed and other namespaces apart
    np.testing.assert_allclose(got[0][1], store.embeddings_of(A, [newer])[newer], rtol=1e-6)
    assert [fid for fid, _ in store.recent_embeddings(A, 1)] == [newer]
    store.soft_delete(A, [newer], NOW)
    assert [fid for fid, _ in store.recent_embeddings(A, 10)] == [older]  # hidden ones are not compared


def test_expire_retention_archives_past_each_systems_cutoff_and_keeps_the_exempt(service: MemoryService, store: Store) -> None:
    maintenance: MaintenanceStore = service.consolidator.maintenance
    old = NOW - timedelta(days=100)
    episode = put(service, "an old episode at the lake", type_="episode", created=old)
    kept = {
        "semantic": put(service, "an old fact about lakes", created=old),
        "pinned": put(service, "a pinned old episode", type_="episode", created=old, pinned=True),
        "keyed": put(service, "a keyed old episode", type_="episode", created=old, memory_key="lake-trip"),
        "anchored": put(service, "an anchored old episode", type_="episode", created=old, is_anchor=True),
        "permanent": put(service, "an important old episode", type_="episode", created=old, importance=0.9),
        "recalled": put(service, "an old episode recalled lately", type_="episode", created=old),
    }
    bobs = put(service, "bob's old episode", "bob", type_="episode", created=old)
    store.record_access([kept["recalled"]], NOW - timedelta(days=1))
    store.flush_access()
    cutoffs = {MemorySystem.EPISODIC: NOW - timedelta(days=90)}
    assert len(maintenance.expire_retention(A, {}, NOW)) == 0
    assert maintenance.expire_retention(A, cutoffs, NOW) == [episode]
    assert {f.id for f in store.get_many(A, [episode, *kept.values()])} == set(kept.values())
    assert store.get_many(B, [bobs])  # another agent's memories are not A's to archive
    assert len(maintenance.expire_retention(A, cutoffs, NOW)) == 0  # already archived
    assert store.restore(A, [episode]) == [episode]  # soft: restorable
    assert len(maintenance.expire_retention(SYSTEM, cutoffs, NOW)) == 2  # the maintenance scope: every namespace


def test_pinned_fragments_are_kept_by_every_maintenance_primitive(service: MemoryService, store: Store) -> None:
    maintenance: MaintenanceStore = service.consolidator.maintenance
    old = NOW - timedelta(days=400)
    for pinned in (True, False):
        tag = "pinned" if pinned else "plain"
        put(service, f"a {tag} old hot procedure", type_="procedure", created=old, importance=0.6, pinned=pinned)
        put(service, f"a {tag} old cold fact", created=old, importance=0.3, pinned=pinned)
        put(service, f"a {tag} unsure old fact", created=old, importance=0.6, pinned=pinned, confidence=0.01)
    before = {f.content: f for f in store.list_fragments(A, SearchFilter(), 10) if f.pinned}
    # each primitive acts on the plain copies (and only on them)
    assert len(maintenance.demote(A, TTLTier.HOT, TTLTier.WARM, NOW - timedelta(days=7), None, NOW)) == 1
    assert len(maintenance.demote(A, TTLTier.WARM, TTLTier.COLD, NOW - timedelta(days=30), NOW - timedelta(days=30), NOW)) == 1
    assert len(maintenance.expire_cold(A, None, [], NOW - timedelta(days=1))) == 1  # the cold fact, cold since its creation
    assert len(maintenance.prune_low_confidence(A, 0.05, 30.0, NOW + timedelta(days=1), archive=True)) == 1  # the unsure fact
    assert len(maintenance.decay_importance(A, 0.5, 10, 2.0, NOW)) == 1
    assert len(maintenance.expire_retention(A, {MemorySystem.PROCEDURAL: NOW + timedelta(days=1)}, NOW)) == 1
    left = {f.content: f for f in store.list_fragments(A, SearchFilter(), 10)}
    assert sorted(left) == sorted(before) == ["a pinned old cold fact", "a pinned old hot procedure", "a pinned unsure old fact"]
    assert {c: (f.ttl_tier, f.importance) for c, f in left.items()} == {c: (f.ttl_tier, f.importance) for c, f in before.items()}


def test_linkages_belong_to_their_memorys_agent_and_go_with_either_memory(service: MemoryService, store: Store) -> None:
    linkages: LinkageStore = service.store  # type: ignore[assignment]
    mine, other = put(service, "alice's holder of linkages"), put(service, "alice's linked memory")
    pooled = put(service, "a shared pool memory", "default")
    bobs = put(service, "bob's memory", "bob")
    wanted = [NewLinkage("memory", other, "supports"), NewLinkage("file", "notes/a.md"), NewLinkage("item", "item-1", "tracks")]
    got = linkages.add_linkages(A, mine, [*wanted, NewLinkage("memory", other, "supports")], NOW)  # a repeat is stored once
    assert [(x.kind, x.target, x.label) for x in got] == [
        ("memory", other, "supports"),
        ("file", "notes/a.md", None),
        ("item", "item-1", "tracks"),
    ]
    assert linkages.add_linkages(A, mine, [NewLinkage("memory", pooled)], NOW)[-1].target == pooled  # a pool memory A sees
    for scope, holder, targets in (
        (A, pooled, [NewLinkage("file", "x.md")]),  # the pool's memory is not A's own
        (A, bobs, [NewLinkage("file", "x.md")]),
        (B, mine, [NewLinkage("file", "x.md")]),
        (A, mine, [NewLinkage("file", "y.md"), NewLinkage("memory", bobs)]),  # a target A does not see: nothing stored
        (A, mine, [NewLinkage("memory", "frag-missing")]),
    ):
        with pytest.raises(NotFound):
            linkages.add_linkages(scope, holder, targets, NOW)
    assert len(linkages.linkages_of(A, [mine])[mine]) == 4
    assert linkages.linkages_of(B, [mine]) == {} and linkages.linkages_of(A, []) == {}
    assert [x.fragment_id for x in linkages.linkages_to(A, [other, pooled])] == [mine, mine]
    assert linkages.linkages_to(B, [other]) == [] and set(linkages.linkages_of(SYSTEM, [mine])) == {mine}  # maintenance: every agent's
    store.soft_delete(A, [other], NOW)
    assert [x.target for x in linkages.linkages_of(A, [mine])[mine]] == ["notes/a.md", "item-1", pooled]  # a hidden target is left out
    store.restore(A, [other])
    store.delete(SYSTEM, [pooled])
    assert len(linkages.linkages_of(A, [mine])[mine]) == 3  # deleting the target deleted its linkage
    store.delete(A, [mine])
    assert linkages.linkages_of(SYSTEM, [mine]) == {} and cast(BulkStore, store).count_rows("memory_linkages") == 0  # and the holder's


# ---------------------------------------------------------------- 003: the skip list and the identity crystal


def skip(skip_id: str, item: str, expires: datetime, vector: np.ndarray | None = None) -> NewSkip:
    return NewSkip(skip_id, item, f"why {item}", expires, vector, None if vector is None else "model-x")


def test_skip_entries_belong_to_one_namespace_expire_and_are_purged_by_writes(app: Any) -> None:
    from memento.storage.protocol import AppStore

    store: AppStore = app.store
    vector = np.arange(4, dtype=np.float32)
    stored = store.add_skip(A, skip("s-1", "aurora", NOW + timedelta(hours=1), vector), NOW)
    assert (stored.id, stored.agent_id, stored.item, stored.reason) == ("s-1", "alice", "aurora", "why aurora")
    assert stored.expires_at == NOW + timedelta(hours=1) and stored.created_at == NOW and stored.embedding_model == "model-x"
    assert np.array_equal(stored.embedding, vector)  # type: ignore[arg-type]
    store.add_skip(A, skip("s-2", "tides", NOW + timedelta(days=2)), NOW + timedelta(minutes=1))
    store.add_skip(B, skip("s-3", "bob's", NOW + timedelta(days=2)), NOW)
    assert [s.id for s in store.skip_entries(A, NOW)] == ["s-2", "s-1"]  # newest first
    assert store.skip_entries(A, NOW)[1].embedding is not None and store.skip_entries(A, NOW)[0].embedding is None
    assert [s.id for s in store.skip_entries(A, NOW + timedelta(hours=1))] == ["s-2"]  # expired at its instant
    assert [s.id for s in store.skip_entries(SYSTEM, NOW)] == []  # exactly the scope's namespace, maintenance too
    assert [s.id for s in store.skip_entries(AgentScope("default"), NOW)] == []
    with pytest.raises(Conflict):
        store.add_skip(B, skip("s-1", "taken id", NOW + timedelta(days=1)), NOW)
    assert not store.remove_skip(B, "s-2", NOW) and [s.id for s in store.skip_entries(A, NOW)] == ["s-2", "s-1"]
    store.add_skip(A, skip("s-4", "later", NOW + timedelta(days=3)), NOW + timedelta(hours=2))  # purges s-1
    assert [s.id for s in store.skip_entries(A, NOW)] == ["s-4", "s-2"]
    assert store.remove_skip(A, "s-2", NOW) and not store.remove_skip(A, "s-2", NOW)
    assert [s.id for s in store.skip_entries(B, NOW)] == ["s-3"]


def test_identity_snapshots_belong_to_one_namespace_and_are_all_kept(app: Any) -> None:
    from memento.storage.protocol import AppStore

    store: AppStore = app.store
    assert store.identities(A, 5) == ([], 0)
    for n in range(3):
        store.add_identity(A, StoredIdentity(f"i-{n}", "ignored", f"crystal {n}", "manual", 0, NOW - timedelta(days=n)))
    made = store.add_identity(B, StoredIdentity("i-b", "alice", "bob's crystal", "crystallized", 7, NOW))
    assert made.agent_id == "bob" and made.source_count == 7  # the row is the scope's, whatever the snapshot says
    newest, total = store.identities(A, 2)
    assert [s.id for s in newest] == ["i-2", "i-1"] and total == 3  # by insertion, not by the clock's created_at
    assert newest[0].crystal == "crystal 2" and newest[0].source == "manual" and newest[0].created_at == NOW - timedelta(days=2)
    assert store.identities(B, 10) == ([made], 1) and store.identities(SYSTEM, 10) == ([], 0)
    with pytest.raises(Conflict):
        store.add_identity(B, StoredIdentity("i-0", "bob", "taken id", "manual", 0, NOW))


# ---------------------------------------------------------------- 003 working memory (WorkingMemoryStore)


def item(item_id: str, agent: str = "alice", *, created: datetime = NOW, **fields: Any) -> WorkItem:
    values: dict[str, Any] = {"category": "active_work", "title": item_id, "content": "", "status": "active", "priority": 0}
    values.update(fields)
    return WorkItem(
        id=item_id,
        agent_id=agent,
        tags=tuple(values.pop("tags", ())),
        next_action=values.pop("next_action", None),
        created_at=created,
        updated_at=created,
        **values,
    )


def test_items_belong_to_one_namespace_and_update_partially(app: Any) -> None:
    store: WorkingMemoryStore = app.store
    store.add_item(A, item("item-1", title="Ship the Ärger release", tags=("ops",), next_action="tag v2", priority=3))
    store.add_item(B, item("item-2", "bob"))
    assert store.get_item(A, "item-1") is not None and store.get_item(B, "item-1") is None
    assert store.get_item(AgentScope("default"), "item-1") is None and store.get_item(SYSTEM, "item-1") is None  # one namespace only
    later = NOW + timedelta(hours=1)
    changed = store.update_item(A, "item-1", ItemChanges(status="paused", tags=("ops", "release")), later)
    assert changed is not None and (changed.status, changed.tags, changed.priority, changed.next_action) == (
        "paused",
        ("ops", "release"),
        3,
        "tag v2",
    )
    assert (changed.created_at, changed.updated_at) == (NOW, later)
    cleared = store.update_item(A, "item-1", ItemChanges(set_next_action=True), later)
    assert cleared is not None and cleared.next_action is None and cleared.title == "Ship the Ärger release"
    assert store.get_item(A, "item-1") == cleared
    assert store.update_item(B, "item-1", ItemChanges(title="taken"), later) is None  # another namespace's: as unknown
    assert store.update_item(A, "item-missing", ItemChanges(title="x"), later) is None
    assert store.delete_item(B, "item-1") is False and store.get_item(A, "item-1") is not None
    assert store.delete_item(A, "item-1") is True and store.get_item(A, "item-1") is None
    assert store.delete_item(A, "item-1") is False


def test_items_list_by_priority_then_newest_with_filters_and_totals(app: Any) -> None:
    store: WorkingMemoryStore = app.store
    store.add_item(A, item("item-low", priority=1, created=NOW))
    store.add_item(A, item("item-high", priority=9, created=NOW - timedelta(days=1)))
    store.add_item(A, item("item-new", priority=1, created=NOW + timedelta(hours=1), category="waiting_for", content="Wait for ÉLAN"))
    store.add_item(A, item("item-same", priority=1, created=NOW))  # created with item-low: the later insert first
    store.add_item(A, item("item-done", priority=10, status="completed", next_action="Archive the Deploy notes"))
    store.add_item(B, item("item-bob", "bob", priority=10))
    found, total = store.list_items(A, ItemQuery())
    assert [i.id for i in found] == ["item-high", "item-new", "item-same", "item-low"] and total == 4  # active and paused
    page, total = store.list_items(A, ItemQuery(limit=2, offset=1))
    assert [i.id for i in page] == ["item-new", "item-same"] and total == 4
    assert [i.id for i in store.list_items(A, ItemQuery(statuses=("completed",)))[0]] == ["item-done"]
    assert [i.id for i in store.list_items(A, ItemQuery(category="waiting_for"))[0]] == ["item-new"]
    assert [i.id for i in store.list_items(A, ItemQuery(terms=("élan",)))[0]] == ["item-new"]  # case-folded, Unicode
    assert store.list_items(A, ItemQuery(terms=("wait", "nothing"))) == ([], 0)  # every term must appear
    assert [i.id for i in store.list_items(A, ItemQuery(statuses=("completed",), terms=("deploy",)))[0]] == ["item-done"]  # next_action
    assert [i.id for i in store.list_items(B, ItemQuery())[0]] == ["item-bob"]
    assert store.list_items(SYSTEM, ItemQuery()) == ([], 0)


def test_sections_are_created_once_replaced_and_capped(app: Any) -> None:
    store: WorkingMemoryStore = app.store
    assert store.add_sections(A, ["active_work", "session_notes"], NOW) == 2
    assert store.add_sections(A, ["session_notes", "activity_log"], NOW) == 1  # existing ones untouched
    written, created = store.put_section(A, "session_notes", "- met bob", NOW + timedelta(minutes=5), 4)
    assert created is False and written.content == "- met bob"
    assert store.put_section(A, "project_x", "notes", NOW, 4)[1] is True
    with pytest.raises(InvalidArgument):
        store.put_section(A, "project_y", "one too many", NOW, 4)
    assert [(s.section, s.content) for s in store.sections(A)] == [
        ("active_work", ""),
        ("session_notes", "- met bob"),
        ("activity_log", ""),
        ("project_x", "notes"),
    ]
    assert store.sections(A)[1].updated_at == NOW + timedelta(minutes=5)
    assert store.sections(B) == [] and store.sections(SYSTEM) == []


def test_a_workspace_is_opened_once_with_its_sections(app: Any) -> None:
    store: WorkingMemoryStore = app.store
    w = AgentScope("alice:proj")
    assert store.workspace_of(w) is None
    assert store.open_workspace(w, "proj", ["active_work", "skip_list"], NOW) is True
    assert store.open_workspace(w, "other", ["activity_log"], NOW + timedelta(hours=1)) is False  # nothing changes
    record = store.workspace_of(w)
    assert record is not None and (record.namespace, record.name, record.created_at) == ("alice:proj", "proj", NOW)
    assert [s.section for s in store.sections(w)] == ["active_work", "skip_list"]
    assert store.sections(A) == []  # the workspace's sections are its own
    store.open_workspace(A, "alice", [], NOW)
    store.open_workspace(AgentScope("alicex"), "alicex", [], NOW)  # a longer name, not a workspace of alice
    store.open_workspace(AgentScope("bob:proj"), "proj", [], NOW)
    assert [r.namespace for r in store.list_workspaces(A)] == ["alice:proj", "alice"]
    assert [r.namespace for r in store.list_workspaces(w)] == ["alice:proj"]
    assert [r.namespace for r in store.list_workspaces(B)] == ["bob:proj"]
    assert [r.namespace for r in store.list_workspaces(SYSTEM)] == ["alice:proj", "alice", "alicex", "bob:proj"]


def test_the_working_memory_summary_counts_the_namespace(app: Any) -> None:
    store: WorkingMemoryStore = app.store
    empty = store.working_memory_summary(A)
    assert (empty.items, empty.sections, empty.items_updated, empty.sections_updated) == ({}, 0, None, None)
    store.add_item(A, item("item-1"))
    store.add_item(A, item("item-2", category="skip_list", created=NOW + timedelta(hours=2)))
    store.add_item(A, item("item-3", status="archived"))
    store.add_item(B, item("item-4", "bob"))
    store.add_sections(A, ["active_work"], NOW + timedelta(hours=1))
    summary = store.working_memory_summary(A)
    assert summary.items == {("active", "active_work"): 1, ("active", "skip_list"): 1, ("archived", "active_work"): 1}
    assert (summary.sections, summary.items_updated, summary.sections_updated) == (1, NOW + timedelta(hours=2), NOW + timedelta(hours=1))


def test_a_server_secret_is_stored_once_and_every_later_caller_reads_the_first_value(app: Any) -> None:
    from memento.storage.protocol import AppStore

    store: AppStore = app.store
    name, other = (
        f"secret-{uuid.uuid4().hex}",
        f"other-{uuid.uuid4().hex}",
    )  # the shared test database keeps secrets (a server's own among them)
    first = store.server_secret(name, b"\x01" * 32, NOW)
    assert first == b"\x01" * 32
    assert store.server_secret(name, b"\x02" * 32, NOW + timedelta(hours=1)) == first  # a second replica's candidate loses
    assert store.server_secret(other, b"\x03" * 32, NOW) == b"\x03" * 32  # names are independent


def test_session_handles_belong_to_one_namespace_and_credential_and_expire(app: Any) -> None:
    from memento.storage.handles import SessionHandle

    store = app.store

    def handle(digest: str, agent: str = "alice", principal: str = "key:a", idle: int = 60) -> SessionHandle:
        return SessionHandle(digest, agent, principal, f"h-{digest}", idle, NOW, NOW, NOW + timedelta(seconds=idle))

    stored = store.add_handle(A, handle("d1"), NOW, 2)
    assert (stored.session_id, stored.expires_at) == ("h-d1", NOW + timedelta(seconds=60))
    with pytest.raises(Conflict):  # a digest is unique
        store.add_handle(A, handle("d1"), NOW, 10)
    store.add_handle(A, handle("d2"), NOW, 2)
    with pytest.raises(Conflict, match="2 sessions are open"):
        store.add_handle(A, handle("d3"), NOW, 2)
    store.add_handle(B, handle("d3", "bob", "key:b"), NOW, 2)  # the cap is per namespace
    # only the owner's namespace and credential find it; a use pushes its expiry
    later = NOW + timedelta(seconds=50)
    assert store.use_handle(B, "d1", "key:a", later) is None
    assert store.use_handle(A, "d1", "key:other", later) is None
    used = store.use_handle(A, "d1", "key:a", later)
    assert used is not None and (used.used_at, used.expires_at) == (later, later + timedelta(seconds=60))
    # expired: unusable, listed for the sweep, dropped only when asked for expired ones
    gone = NOW + timedelta(seconds=61)
    assert store.use_handle(A, "d2", "key:a", gone) is None
    assert [h.digest for h in store.expired_handles(gone, 10)] == ["d2", "d3"]
    assert store.drop_handle(A, "d1", "key:a", expired_by=gone) is None  # d1 is live
    assert store.drop_handle(B, "d2", "key:a", expired_by=gone) is None  # not bob's
    dropped = store.drop_handle(A, "d2", "key:a", expired_by=gone)
    assert dropped is not None and dropped.session_id == "h-d2"
    assert store.drop_handle(A, "d1", "key:other") is None
    assert store.drop_handle(A, "d1", "key:a") is not None
    assert [h.digest for h in store.expired_handles(gone, 10)] == ["d3"]


def test_the_tier_and_pin_filters_apply_at_every_tier_and_in_counts(service: MemoryService, store: Store) -> None:
    """The dashboard's filters (issue 18): SearchFilter.ttl_tier and .pinned, in SQL and in Python alike."""
    pinned = put(service, "the gateway certificate renews in march", pinned=True)
    cold = put(service, "the gateway logs rotate weekly")
    store.update(A, cold, FragmentChanges(ttl_tier=TTLTier.COLD), "alice", NOW)
    for filt, expected in (
        (SearchFilter(pinned=True), {pinned}),
        (SearchFilter(pinned=False), {cold}),
        (SearchFilter(ttl_tier=TTLTier.COLD), {cold}),
        (SearchFilter(ttl_tier=TTLTier.COLD, pinned=True), set()),
    ):
        assert {f.id for f in store.recent(A, filt, 10)} == expected, filt
        assert store.count(A, filt) == len(expected), filt
        assert {h.id for h in store.text_search(A, query_terms("gateway"), filt, 10)} == expected, filt
        assert {f.id for f in store.get_many(A, [pinned, cold]) if filt.matches(f)} == expected, filt
        assert service.embedder is not None
        vector = service.embedder.embed_query("gateway")
        assert {h.id for h in store.vector_search(A, vector, filt, 10)} == expected, filt


def test_restore_many_brings_back_all_or_none(service: MemoryService, store: Store) -> None:
    ctx = CallContext(agent_id="alice")
    gone = [put(service, "the blue kettle is descaled monthly"), put(service, "the red kettle leaks")]
    live = put(service, "the green kettle is new")
    store.soft_delete(A, gone, NOW)
    with pytest.raises(NotFound, match=live):
        service.restore_many([*gone, live], ctx)
    assert store.get_many(A, gone) == []  # nothing came back
    assert sorted(service.restore_many(gone, ctx)) == sorted(gone)
    assert {f.id for f in store.get_many(A, gone)} == set(gone)


def test_field_counts_group_by_tier_system_and_pin(service: MemoryService, store: Store) -> None:
    """AnalyticsStore.field_counts (the dashboard's breakdown): the caller's memories, working memory apart."""
    pinned = put(service, "the invoice run starts at noon", pinned=True)
    cold = put(service, "the old invoice format had seven columns")
    store.update(A, cold, FragmentChanges(ttl_tier=TTLTier.COLD), "alice", NOW)
    put(service, "bob's invoice note", "bob")
    put(service, "a scratch note of this session", session="s-1")
    analytics = cast(AnalyticsStore, store)
    assert analytics.field_counts(A, "pinned") == {"true": 1, "false": 1}
    assert analytics.field_counts(A, "ttl_tier")["cold"] == 1 and sum(analytics.field_counts(A, "ttl_tier").values()) == 2
    fragment = store.get_many(A, [pinned])[0]
    assert analytics.field_counts(A, "memory_system")[fragment.memory_system.value] >= 1
    assert sum(analytics.field_counts(A, "memory_system").values()) == 2


def test_a_unit_of_work_is_known_to_the_thread_inside_it_only(service: MemoryService, store: Store) -> None:
    # Recall reads its vector tier on another thread only outside a unit of work (retrieval/beside.py):
    # another thread's reads would not see the unit's own writes.
    assert not store.unit_of_work_open()
    seen_elsewhere: list[bool] = []
    with store.atomic():
        assert store.unit_of_work_open()
        with store.atomic():
            assert store.unit_of_work_open()
        assert store.unit_of_work_open()
        worker = threading.Thread(target=lambda: seen_elsewhere.append(store.unit_of_work_open()))
        worker.start()
        worker.join()
    assert seen_elsewhere == [False]
    assert not store.unit_of_work_open()
    with store.rehearsal():
        assert store.unit_of_work_open()
    assert not store.unit_of_work_open()
    with pytest.raises(RuntimeError, match="boom"), store.atomic():
        raise RuntimeError("boom")
    assert not store.unit_of_work_open()


def test_a_read_session_reads_as_alone_is_no_unit_of_work_and_refuses_writes(service: MemoryService, store: Store) -> None:
    # Recall's caller reads inside Store.reading (on PostgreSQL one read-only transaction instead
    # of one per call): what they return must not change, the vector tier's helper thread must
    # still run beside, and a write slipped inside must fail and leave nothing behind.
    first = put(service, "the lighthouse keeper logs the ships at dawn")
    second = put(service, "the lighthouse lamp needs a new wick before winter")
    put(service, "bob keeps his own lighthouse notes", "bob")
    terms = ["lighthous"]
    alone = (store.get_many(A, [first, second]), store.text_search(A, terms, SearchFilter(), 10), store.rank_features(A, [first, second]))
    with store.reading(A):
        assert not store.unit_of_work_open()
        inside = (
            store.get_many(A, [first, second]),
            store.text_search(A, terms, SearchFilter(), 10),
            store.rank_features(A, [first, second]),
        )
        with store.reading(A):  # nested: the same session
            assert [f.id for f in store.get_many(A, [first])] == [first]
    assert inside == alone
    assert {h.id for h in inside[1]} == {first, second}  # bob's note stays out
    with pytest.raises(Exception, match="(?i)read.only") as refused, store.reading(A):
        store.insert(A, new(service, "written inside a read session"))
    assert "INSERT" in str(refused.value) or "read-only session" in str(refused.value)
    assert not store.unit_of_work_open()
    assert store.text_search(A, ["written"], SearchFilter(), 10) == []
    # The session ends cleanly after a failed write: the next calls work as before.
    assert [f.id for f in store.get_many(A, [first])] == [first]
    with store.atomic():  # inside a unit of work, reading() is that unit: its writes go on
        with store.reading(A):
            assert store.unit_of_work_open()
        store.insert(A, new(service, "written inside a unit of work"))
    assert [h.id for h in store.text_search(A, ["written"], SearchFilter(), 10)]


def test_the_full_text_tier_finds_a_scopes_few_matches_behind_many_better_ones_it_cannot_see(service: MemoryService, store: Store) -> None:
    # SQLite ranks the matches before reading their rows and reads only the best few hundred; when
    # the scope (or a filter) leaves too few of those, every match is read, as before.
    import_fragments(service, "bob", [f"zebra zebra zebra crossing number {i}" for i in range(450)])
    mine = [put(service, f"the zebra at the zoo was asleep when we came by on a long afternoon walk, visit {i}") for i in range(3)]
    tagged = put(service, "a zebra painted on the nursery wall next to a long row of other animals", tags=("home",))
    found = store.text_search(A, query_terms("zebra"), SearchFilter(), 10)
    assert sorted(h.id for h in found) == sorted([*mine, tagged])
    assert [h.id for h in store.text_search(A, query_terms("zebra"), SearchFilter(tags_all=("home",)), 10)] == [tagged]
    assert len(store.text_search(B, query_terms("zebra"), SearchFilter(), 10)) == 10


def test_the_full_text_tier_weighs_terms_by_the_latest_memories(service: MemoryService, store: Store) -> None:
    """With an IDF window: a word everywhere in the latest memories weighs little however rare in
    the scope as a whole (the same on both backends); another agent's memories are not counted."""
    search = store.search  # type: ignore[attr-defined]
    search.scoring = dataclasses.replace(search.scoring, idf_window=60, pool=400)  # every match rescored
    import_fragments(service, "alice", [f"an old note about the cat number {i}" for i in range(240)])
    old_cat = put(service, "a cat photo from the archive", created=NOW - timedelta(days=30))
    recent = [put(service, f"the garden party planning, item {i}", created=NOW + timedelta(minutes=i)) for i in range(59)]
    for i in range(100):  # bob's garden does not change alice's statistics
        put(service, f"bob keeps a cat in the garden shed, {i}", "bob")
    hits = store.text_search(A, query_terms("garden cat"), SearchFilter(), 400)
    ranked = [h.id for h in hits]
    # the latest 60 of alice's memories hold "garden" 59 times and "cat" once: the cat weighs more
    assert ranked.index(old_cat) < min(ranked.index(r) for r in recent)
    search.scoring = dataclasses.replace(search.scoring, idf_window=0)  # weighed over the whole scope: "garden" is the rarer
    ranked = [h.id for h in store.text_search(A, query_terms("garden cat"), SearchFilter(), 400)]
    assert ranked.index(old_cat) > max(ranked.index(r) for r in recent)


def test_the_full_text_tier_scores_given_memories_beyond_its_pool_as_it_would_in_it(service: MemoryService, store: Store) -> None:
    # text_scores: what recall asks for the memories the vector tier found that the full-text
    # tier's pool left out; the same score the tier gives, nothing for a memory without the words,
    # nothing of another agent's.
    notes = [put(service, f"the harbour ferry timetable, page {i}") for i in range(12)]
    other = put(service, "we watched the ferry leave the harbour at dawn with our coffee")
    unrelated = put(service, "a recipe for lentil soup")
    bobs = put(service, "bob's harbour ferry notes", "bob")
    terms = query_terms("harbour ferry")
    whole = {h.id: h.score for h in store.text_search(A, terms, SearchFilter(), 50)}
    assert set(whole) == {*notes, other}
    few = {h.id for h in store.text_search(A, terms, SearchFilter(), 3)}
    beyond = [i for i in [*notes, other] if i not in few]
    scores = store.text_scores(A, terms, [*beyond, unrelated, bobs, "no-such-id"])
    assert set(scores) == set(beyond)
    assert all(abs(scores[i] - whole[i]) < 1e-9 for i in beyond)
    assert store.text_scores(A, [], notes) == {} and store.text_scores(A, terms, []) == {}
    assert set(store.text_scores(B, terms, [bobs, other])) == {bobs}


def test_reanalysing_the_text_repairs_an_index_a_faulty_analyser_wrote(service: MemoryService, app: Any) -> None:
    """`memento reindex` (Store.reanalyse_text): entries written while the analyser gave wrong stems
    are written again from the content, in batches; scope and forgetting hold as before."""
    from memento import analysis
    from memento.storage import terms

    def reset() -> None:
        analysis._stem.cache_clear()
        terms._word_terms.cache_clear()
        terms.TEXTS.clear()

    class Faulty:
        def stemWord(self, word: str) -> str:
            return word[::-1]

    store = app.store
    saved = analysis.STEMMER_FACTORY
    analysis.STEMMER_FACTORY = Faulty
    reset()
    try:
        written = [put(service, f"the gardener planted tomatoes in row {i}", topic="horticulture") for i in range(5)]
        bobs = put(service, "bob's gardener planted tomatoes too", "bob", topic="horticulture")
        forgotten = put(service, "a gardener planted tomatoes and it was forgotten", topic="horticulture")
        erased = put(service, "a gardener planted tomatoes and it was erased", topic="horticulture")
    finally:
        analysis.STEMMER_FACTORY = saved
        reset()
    assert store.soft_delete(A, [forgotten], NOW) == [forgotten] and store.delete(A, [erased]) == [erased]
    query = query_terms("gardener planted tomatoes")
    assert store.text_search(A, query, SearchFilter(), 10) == []  # the index holds the wrong terms

    seen, after, batches = 0, 0, 0
    while True:
        count, after = store.reanalyse_text(after, 3)
        if not count:
            break
        seen, batches = seen + count, batches + 1
    assert seen >= 7 and batches >= 3 and after == 0
    found = {h.id for h in store.text_search(A, query, SearchFilter(), 10)}
    assert found == set(written)  # bob's is not alice's; the forgotten and erased ones stay out
    assert {h.id for h in store.text_search(B, query, SearchFilter(), 10)} == {bobs}
    topic = store.text_search(A, query_terms("horticulture"), SearchFilter(), 10)
    assert {h.id for h in topic} == set(written)  # the topic column is written again too
    assert store.reanalyse_text(10**12, 3) == (0, 0)


def test_a_tag_counted_common_is_not_counted_again_until_its_time_is_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """sqlfilter.CommonTags: a rare tag is counted every time (a tag that becomes common is seen
    at once); a common one is taken as common without counting for COMMON_TAGS_TTL_S."""
    monkeypatch.setattr(sqlfilter, "FEW_TAGGED", 10)
    now = [0.0]
    tags = sqlfilter.CommonTags(ttl_s=60, clock=lambda: now[0])
    sizes = {"rare": 3, "team": 40}
    asked: list[tuple[str, int]] = []

    def count(tag: str) -> Any:
        def upto(at_most: int) -> int:
            asked.append((tag, at_most))
            return min(sizes[tag], at_most)

        return upto

    assert tags.few("rare", count("rare")) and tags.few("rare", count("rare"))
    assert not tags.few("team", count("team")) and not tags.few("team", count("team"))
    assert asked == [("rare", 10), ("rare", 10), ("team", 10)]
    sizes["rare"] = 50  # became common: seen at its next count
    assert not tags.few("rare", count("rare"))
    sizes["team"] = 2  # stopped being common: seen once the kept answer is stale
    now[0] = 59.0
    assert not tags.few("team", count("team"))
    now[0] = 61.0
    assert tags.few("team", count("team"))
