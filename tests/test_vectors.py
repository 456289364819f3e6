"""The per-agent vector index: exact and HNSW paths, persistence and rebuild."""

from __future__ import annotations

import json
import shutil
import threading
from importlib import resources
from pathlib import Path

import numpy as np
import pysqlite3.dbapi2 as sqlite3

from memento.app import build_app
from memento.embeddings.hashing import HashEmbedder
from memento.models import AgentScope, CallContext, ForgetInput, RecallInput, RememberInput
from memento.settings import Settings
from memento.storage.protocol import SearchFilter
from memento.storage.sqlite import SQLiteStore

TEXTS = [
    f"note {i} about {topic}"
    for i, topic in enumerate(
        [
            "postgres vacuum",
            "redis eviction",
            "kafka lag",
            "nginx timeouts",
            "python asyncio",
            "docker layers",
            "git rebase",
            "terraform state",
            "grafana alerts",
            "linux cgroups",
        ]
        * 4
    )
]


def build(tmp_path: Path, ann_threshold: int = 5000):  # type: ignore[no-untyped-def]
    settings = Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'v.db'}", MEMENTO_ANN_THRESHOLD=ann_threshold)
    return build_app(settings, embedder=HashEmbedder(128))


def fill(app) -> None:  # type: ignore[no-untyped-def]
    for text in TEXTS:
        app.service.remember(RememberInput(content=text, topic="ops", type="fact", agentId="agent-v"), CallContext())
    assert app.service.settle()  # the embedding worker has stored every vector


def semantic(app, query: str) -> list[str]:  # type: ignore[no-untyped-def]
    vector = app.embedder.embed_query(query)
    return [h.id for h in app.store.vector_search(AgentScope("agent-v"), vector, SearchFilter(), 5)]


def test_hnsw_and_exact_search_agree_on_the_nearest(tmp_path: Path) -> None:
    exact_app = build(tmp_path / "a")
    ann_app = build(tmp_path / "b", ann_threshold=0)
    try:
        fill(exact_app)
        fill(ann_app)
        for query in ("kafka lag", "terraform state", "asyncio"):
            exact = [exact_app.store.get_many(AgentScope("agent-v"), [i])[0].content for i in semantic(exact_app, query)[:1]]
            ann = [ann_app.store.get_many(AgentScope("agent-v"), [i])[0].content for i in semantic(ann_app, query)[:1]]
            assert exact == ann
    finally:
        exact_app.close()
        ann_app.close()


def test_saved_index_is_reused_and_a_stale_one_is_rebuilt(tmp_path: Path) -> None:
    app = build(tmp_path)
    fill(app)
    before = semantic(app, "redis eviction")
    app.close()
    saved = list((tmp_path / "v.db.vectors").glob("*.usearch"))
    assert saved

    again = build(tmp_path)
    assert semantic(again, "redis eviction") == before
    victim = before[0]
    again.service.forget(ForgetInput(id=victim, agentId="agent-v"), CallContext())
    # simulate a crash: the index file on disk is left from before the deletion
    again.store._closed = True
    again.store._writer.close()

    third = build(tmp_path)
    try:
        assert victim not in semantic(third, "redis eviction")
        assert third.store.vectors.size("agent-v") == len(TEXTS) - 1
    finally:
        third.close()


def test_vectors_are_scoped_per_agent(tmp_path: Path) -> None:
    app = build(tmp_path)
    try:
        fill(app)
        other = app.service.recall(RecallInput(text="kafka lag", agentId="agent-w"), CallContext())
        assert other.fragments == []
        assert app.store.vectors.size("agent-w") == 0
    finally:
        app.close()


def test_filtered_vector_search_falls_back_to_exact_over_the_filter(tmp_path: Path) -> None:
    app = build(tmp_path, ann_threshold=0)
    try:
        fill(app)
        app.service.remember(
            RememberInput(content="kafka lag on the rare topic", topic="rare", type="fact", agentId="agent-v"), CallContext()
        )
        assert app.service.settle()
        vector = app.embedder.embed_query("kafka lag")
        hits = app.store.vector_search(AgentScope("agent-v"), vector, SearchFilter(topic="rare"), 5)
        assert len(hits) == 1
        assert np.isfinite(hits[0].score)
    finally:
        app.close()


# ------------------------------------------------------------ several writers on one file
# Two apps on one file stand for two processes: each has its own connections and its own index
# (the end-to-end versions with real processes are in test_vector_freshness.py).


def test_an_index_applies_a_few_foreign_writes_in_place_and_rebuilds_after_a_reindex(tmp_path: Path) -> None:
    mine, theirs = build(tmp_path), build(tmp_path)
    try:
        fill(mine)
        assert semantic(mine, "kafka lag")
        loaded = mine.store.vectors._agents["agent-v"].index
        theirs.service.remember(RememberInput(content="vault unseals at boot", topic="ops", type="fact", agentId="agent-v"), CallContext())
        assert theirs.service.settle()
        first = semantic(mine, "vault unseals at boot")[0]
        assert mine.store.get_many(AgentScope("agent-v"), [first])[0].content == "vault unseals at boot"
        assert mine.store.vectors._agents["agent-v"].index is loaded  # caught up, not rebuilt
        # A re-embedding elsewhere touches every vector: rebuilding is cheaper than catching up.
        theirs.store.clear_embeddings()
        assert semantic(mine, "kafka lag") == []
        assert theirs.service._backfill(AgentScope("system")) == len(TEXTS) + 1
        assert semantic(mine, "vault unseals at boot")[0] == first
        assert mine.store.vectors.size("agent-v") == len(TEXTS) + 1
    finally:
        theirs.close()
        mine.close()


def test_a_saved_index_claims_only_what_it_saw(tmp_path: Path) -> None:
    mine, theirs = build(tmp_path), build(tmp_path)
    fill(mine)
    assert semantic(theirs, "kafka lag")
    late = theirs.service.remember(
        RememberInput(content="vault unseals at boot", topic="ops", type="fact", agentId="agent-v"), CallContext()
    )
    assert theirs.service.settle()
    mine.service.remember(RememberInput(content="the proxy strips cookies", topic="ops", type="fact", agentId="agent-v"), CallContext())
    assert mine.service.settle()
    # This index applied its own write but never searched after the other's: its stamp stays behind.
    mine.store.vectors.save()
    saved = json.loads(next((tmp_path / "v.db.vectors").glob("*.json")).read_text())
    mine.store._closed = True  # as if it crashed right after saving
    theirs.store._closed = True
    again = build(tmp_path)
    try:
        assert semantic(again, "vault unseals at boot")[0] == late.id
    finally:
        again.close()
    assert saved["change"] == mine.store.vectors._agents["agent-v"].stamp < theirs.store.vectors.source.clock()


def test_a_saved_index_is_never_loaded_into_another_database(tmp_path: Path) -> None:
    first = build(tmp_path / "a")
    fill(first)
    semantic(first, "kafka lag")
    first.close()
    # Another database with as many writes (so as many changes) and different memories.
    other = build(tmp_path / "b")
    for i in range(len(TEXTS)):
        other.service.remember(RememberInput(content=f"vault unseal share {i}", topic="ops", type="fact", agentId="agent-v"), CallContext())
    assert semantic(other, "vault unseal share 7")
    other.close()
    shutil.rmtree(tmp_path / "b" / "v.db.vectors")
    shutil.copytree(tmp_path / "a" / "v.db.vectors", tmp_path / "b" / "v.db.vectors")
    reopened = build(tmp_path / "b")
    try:
        best = reopened.store.get_many(AgentScope("agent-v"), semantic(reopened, "vault unseal share 7")[:1])
        assert [f.content for f in best] == ["vault unseal share 7"]
    finally:
        reopened.close()


def test_an_existing_database_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    folder = resources.files("memento.storage.migrations").joinpath("sqlite")
    conn = sqlite3.connect(str(path), isolation_level=None)
    vector = HashEmbedder(128).embed_passages(["an old memory about backups"])[0]
    conn.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for name in ("0001_initial.sql", "0002_fts_vocab.sql"):  # the schema before the change log
        conn.executescript(folder.joinpath(name).read_text())
        conn.execute("INSERT INTO schema_migrations VALUES (?, '2026-01-01')", (name,))
    conn.execute(
        "INSERT INTO fragments (id, content, topic, type, importance, content_hash, agent_id, created_at, ttl_tier)"
        " VALUES ('frag-old', 'an old memory about backups', 'ops', 'fact', 0.5, 'h', 'agent-v', '2026-01-01', 'warm')"
    )
    conn.execute("INSERT INTO fragment_embeddings VALUES (1, 'agent-v', 'hash:v1:128', 128, ?)", (vector.tobytes(),))
    conn.execute("INSERT INTO vector_generations VALUES ('agent-v', 1)")
    conn.close()
    app = build(tmp_path)
    try:
        assert "0003_vector_changes.sql" in app.store.migrations()
        assert semantic(app, "an old memory about backups") == ["frag-old"]
        app.store.delete(AgentScope("agent-v"), ["frag-old"])
        assert semantic(app, "an old memory about backups") == []
    finally:
        app.close()


def test_processes_starting_together_apply_each_migration_once(tmp_path: Path) -> None:
    start = threading.Barrier(4)
    failures: list[BaseException] = []

    def open_store() -> None:
        start.wait(timeout=30)
        try:
            SQLiteStore(tmp_path / "fresh.db", embedding_model="hash:v1:128", dimensions=128).close()
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion below
            failures.append(exc)

    threads = [threading.Thread(target=open_store) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []
    store = SQLiteStore(tmp_path / "fresh.db", embedding_model="hash:v1:128", dimensions=128)
    try:
        shipped = [e.name for e in resources.files("memento.storage.migrations").joinpath("sqlite").iterdir() if e.name.endswith(".sql")]
        assert sorted(store.migrations()) == sorted(set(store.migrations())) == sorted(shipped)
    finally:
        store.close()
