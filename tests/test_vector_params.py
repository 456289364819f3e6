"""The HNSW parameters (HNSW_M, HNSW_EF_CONSTRUCTION, HNSW_EF_SEARCH) reach the graph, a saved index
of an older release still loads, one built with other parameters is rebuilt, and the scale
benchmark's helpers (bench/distractors.py, bench/hnsw_recall.py) work on a small corpus."""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from memento.app import build_app
from memento.embeddings.hashing import HashEmbedder
from memento.factory import FragmentFactory
from memento.models import AgentScope, CallContext, FragmentType, RecallInput, RememberInput
from memento.settings import Settings
from memento.storage.protocol import SearchFilter
from memento.storage.sqlite import SQLiteStore
from memento.storage.sqlite_vectors import SQLiteVectorSource
from memento.storage.vectors import DEFAULT_EF_CONSTRUCTION, DEFAULT_M, VectorIndex

BENCH = Path(__file__).resolve().parents[1] / "bench"
AGENT = "agent-p"
DIM = 64


class CountingSource(SQLiteVectorSource):
    """The SQLite store's own vector source, counting full loads (each one is an index rebuild)."""

    builds = 0

    def load(self, agent: str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        type(self).builds += 1
        yield from super().load(agent)


def filled_store(path: Path, count: int = 300, dim: int = DIM) -> SQLiteStore:
    embedder = HashEmbedder(dim)
    store = SQLiteStore(path, embedding_model=embedder.name, dimensions=dim)
    vectors = embedder.embed_passages([f"memory {i} about topic {i % 17} and item {i % 5}" for i in range(count)])
    rows = []
    factory = FragmentFactory()
    for i in range(count):
        draft = factory.draft(
            content=f"memory {i} about topic {i % 17} and item {i % 5}", topic="t", type_=FragmentType.FACT, created_at=datetime.now(UTC)
        )
        rows.append(
            {
                "id": draft.id,
                "content": draft.content,
                "topic": "t",
                "keywords": draft.keywords,
                "type": "fact",
                "importance": 0.5,
                "content_hash": draft.content_hash,
                "agent_id": AGENT,
                "created_at": draft.created_at,
                "ttl_tier": draft.ttl_tier.value,
                "estimated_tokens": draft.estimated_tokens,
                "utility_score": 1.0,
                "access_count": 0,
                "linked_to": [],
                "is_anchor": False,
                "embedding": vectors[i],
                "embedding_model": embedder.name,
            }
        )
    assert store.import_rows("fragments", rows) == count
    return store


def index_over(store: SQLiteStore, directory: Path | None, **params: int) -> VectorIndex:
    assert store.vectors is not None
    source = CountingSource(store.db.committed_reader, store.db.connect, store.vectors.model, DIM)
    return VectorIndex(DIM, store.vectors.model, directory, source, ann_threshold=0, **params)


def nearest(index: VectorIndex, k: int = 5) -> list[int]:
    query = HashEmbedder(DIM).embed_query("memory about topic 3 and item 2")
    return [key for key, _ in index.search(AGENT, query, k)]


def test_the_graph_is_built_with_the_configured_parameters(tmp_path: Path) -> None:
    store = filled_store(tmp_path / "p.db")
    try:
        index = index_over(store, None, m=8, ef_construction=40, ef_search=50)
        assert index.size(AGENT) == 300
        assert index.parameters(AGENT) == {"m": 8, "ef_construction": 40, "ef_search": 50}
        index.set_ef_search(200)
        assert index.parameters(AGENT)["ef_search"] == 200
        assert len(nearest(index)) == 5
    finally:
        store.close()


def test_the_settings_reach_the_store_index(tmp_path: Path) -> None:
    settings = Settings(
        DATABASE_URL=f"sqlite:///{tmp_path / 's.db'}", MEMENTO_ANN_THRESHOLD=0, HNSW_M=12, HNSW_EF_CONSTRUCTION=48, HNSW_EF_SEARCH=96
    )
    app = build_app(settings, embedder=HashEmbedder(DIM))
    try:
        for text in ("kafka consumer lag", "postgres vacuum settings", "redis eviction policy"):
            app.service.remember(RememberInput(content=text, topic="ops", type="fact", agentId=AGENT), CallContext())
        assert app.service.settle()
        vector = HashEmbedder(DIM).embed_query("redis eviction")
        assert app.store.vector_search(AgentScope(AGENT), vector, SearchFilter(), 3)
        assert app.store.vectors.parameters(AGENT) == {"m": 12, "ef_construction": 48, "ef_search": 96}  # type: ignore[attr-defined]
        found = app.service.recall(RecallInput(text="redis eviction", agentId=AGENT, limit=3), CallContext())
        assert found.fragments[0].content == "redis eviction policy"
    finally:
        app.close()


@pytest.mark.parametrize("name, value", [("HNSW_M", "2"), ("HNSW_M", "500"), ("HNSW_EF_CONSTRUCTION", "4")])
def test_out_of_range_parameters_are_refused(name: str, value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError):
        Settings()


def test_an_index_saved_by_an_older_release_loads_and_other_parameters_rebuild(tmp_path: Path) -> None:
    store = filled_store(tmp_path / "o.db")
    folder = tmp_path / "o.db.vectors"
    try:
        first = index_over(store, folder, m=16, ef_construction=64)  # the old release's fixed graph
        before = nearest(first)
        first.save()
        (meta_path,) = folder.glob("*.json")
        meta = json.loads(meta_path.read_text())
        assert (meta["m"], meta["ef_construction"]) == (16, 64)
        # what an older release wrote: no parameters in the metadata
        old = {k: meta[k] for k in ("instance", "model", "dim", "change", "file")}
        meta_path.write_text(json.dumps(old))

        CountingSource.builds = 0
        loaded = index_over(store, folder, m=16, ef_construction=64, ef_search=256)
        assert nearest(loaded) == before
        assert CountingSource.builds == 0  # loaded from disk, not rebuilt
        assert loaded.parameters(AGENT) == {"m": 16, "ef_construction": 64, "ef_search": 256}

        defaults = index_over(store, folder).parameters(AGENT)  # today's defaults differ: rebuilt (not saved)
        assert (defaults["m"], defaults["ef_construction"]) == (DEFAULT_M, DEFAULT_EF_CONSTRUCTION)
        assert CountingSource.builds == 1
        CountingSource.builds = 0
        other_m = index_over(store, folder, m=24, ef_construction=64)
        assert other_m.size(AGENT) == 300
        assert CountingSource.builds == 1  # the saved graph has m=16: rebuilt with 24
        assert other_m.parameters(AGENT)["m"] == 24
        other_m.save()
        assert json.loads(meta_path.read_text())["m"] == 24

        other_efc = index_over(store, folder, m=24, ef_construction=128)
        assert other_efc.size(AGENT) == 300
        assert CountingSource.builds == 2  # same m, other ef_construction: rebuilt as well
        assert other_efc.parameters(AGENT) == {"m": 24, "ef_construction": 128, "ef_search": 512}
    finally:
        store.close()


def test_bad_parameters_are_refused_by_the_index(tmp_path: Path) -> None:
    store = filled_store(tmp_path / "b.db", count=5)
    try:
        with pytest.raises(ValueError):
            index_over(store, None, m=1)
        index = index_over(store, None)
        with pytest.raises(ValueError):
            index.set_ef_search(0)
    finally:
        store.close()


# ------------------------------------------------------------------ the scale benchmark's helpers


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("distractors"), importlib.import_module("hnsw_recall")


def write_source(path: Path) -> Path:
    lines = ["name\tversion\tmonth\trank\tsummary"]
    for i in range(400):
        lines.append(f"pkg{i}\t1.0\t2020-01\t\tA library number {i % 350} for some task")  # 50 duplicates
    lines.append("empty\t1.0\t2020-01\t\t   ")
    lines.append("short\t1.0")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_distractor_texts_are_deduplicated_seeded_and_disjoint(tmp_path: Path, bench) -> None:  # type: ignore[no-untyped-def]
    distractors, _ = bench
    source = write_source(tmp_path / "p.tsv")
    assert len(distractors.read_source(source)) == 350
    first = distractors.distractor_texts(100, source, seed=1)
    assert first == distractors.distractor_texts(100, source, seed=1)
    assert first != distractors.distractor_texts(100, source, seed=2)
    assert len(set(first)) == 100 and all(t.strip() for t in first)
    assert first[:10] == distractors.distractor_texts(10, source, seed=1)
    queries = distractors.distractor_texts(50, source, seed=1, offset=100)
    assert not set(first) & set(queries)
    big = tmp_path / "big.txt"
    big.write_text("".join(f"summary of package {i}\n" for i in range(1500)))
    tail = distractors.query_texts(30, big, seed=1)
    assert tail == distractors.query_texts(60, big, seed=1)[:30]  # the same queries whatever their number
    assert len(tail) == 30 and not set(tail) & set(distractors.distractor_texts(500, big, seed=1))
    plain = tmp_path / "lines.txt"
    plain.write_text("one text\n\nanother text\none text\n")
    assert distractors.read_source(plain) == ["one text", "another text"]
    with pytest.raises(FileNotFoundError):
        distractors.read_source(tmp_path / "missing.txt")


def test_distractors_are_bulk_imported_into_one_agent_before_a_date(tmp_path: Path, bench) -> None:  # type: ignore[no-untyped-def]
    distractors, _ = bench
    source = write_source(tmp_path / "p.tsv")
    texts = distractors.distractor_texts(200, source)
    embedder = HashEmbedder(DIM)
    settings = Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'd.db'}")
    app = build_app(settings, embedder=embedder)
    try:
        vectors = distractors.embed_all(embedder, texts, batch=64, progress=False)
        epoch = [datetime(2000, 1, 1, tzinfo=UTC)] * len(texts)
        rows = distractors.distractor_rows(FragmentFactory(), texts, vectors, agent=AGENT, model=embedder.name, created_at=epoch)
        before = datetime(2023, 5, 1, tzinfo=UTC)
        assert distractors.import_distractors(app.store, rows, before=before, batch=64) == 200
        assert distractors.import_distractors(app.store, rows, before=before) == 0  # the same rows again: skipped
        assert app.store.vectors.size(AGENT) == 200  # type: ignore[attr-defined]
        found = app.service.recall(RecallInput(text=texts[7], agentId=AGENT, limit=5), CallContext())
        assert found.fragments and found.fragments[0].content == texts[7]
        assert all(datetime.fromisoformat(f.created_at) < before for f in found.fragments)
        other = app.service.recall(RecallInput(text=texts[7], agentId="someone-else", limit=5), CallContext())
        assert not other.fragments
        with pytest.raises(ValueError):
            distractors.distractor_rows(FragmentFactory(), texts, vectors[:3], agent=AGENT, model=embedder.name, created_at=epoch)
    finally:
        app.close()


def test_the_recall_sweep_runs_on_a_small_corpus(tmp_path: Path, bench) -> None:  # type: ignore[no-untyped-def]
    distractors, hnsw_recall = bench
    source = write_source(tmp_path / "p.tsv")
    texts = distractors.distractor_texts(300, source)
    embedder = HashEmbedder(DIM)
    store = hnsw_recall.fill_store(tmp_path / "h.db", texts, embedder.embed_passages(texts), embedder.name)
    try:
        queries = np.stack([embedder.embed_query(t) for t in distractors.distractor_texts(20, source, offset=300)])
        rows, size = hnsw_recall.sweep(store, queries, 10, [8], [32], [16, 300], progress=False)
        assert size == 300
        assert [(r.m, r.ef_construction, r.ef_search) for r in rows] == [(0, 0, 0), (8, 32, 16), (8, 32, 300)]
        assert rows[0].recall >= 0.95  # the exact scan (half-precision ties aside)
        assert all(0.0 <= r.recall <= 1.0 for r in rows)
        assert rows[2].recall >= rows[1].recall  # a candidate list as large as the store is exhaustive
    finally:
        store.close()


def test_two_models_indexes_are_saved_side_by_side_and_files_of_the_old_name_still_load(tmp_path: Path) -> None:
    """The saved files are named by agent, model and size. Named by the agent alone (before), an
    index of another model saved over the same agent's (another embedding provider configured, a
    process started with another model) and removed its graph: a million memories' graph took
    ~20 minutes to build again."""
    store = filled_store(tmp_path / "m.db")
    folder = tmp_path / "m.db.vectors"
    assert store.vectors is not None
    model = store.vectors.model
    try:
        mine = index_over(store, folder)
        before = nearest(mine)
        mine.save()
        source = SQLiteVectorSource(store.db.committed_reader, store.db.connect, "other:model", DIM)
        other = VectorIndex(DIM, "other:model", folder, source, ann_threshold=0)
        assert other.size(AGENT) == 0
        other.save()
        assert {json.loads(p.read_text())["model"] for p in folder.glob("*.json")} == {model, "other:model"}
        CountingSource.builds = 0
        assert nearest(index_over(store, folder)) == before
        assert CountingSource.builds == 0  # loaded: the other model's save removed nothing

        # what the release before wrote: this model's files named by the agent alone
        (meta_path,) = [p for p in folder.glob("*.json") if json.loads(p.read_text())["model"] == model]
        meta = json.loads(meta_path.read_text())
        legacy = hashlib.sha256(AGENT.encode()).hexdigest()[:20]
        old_file = f"{legacy}-{meta['change']}-0123456789ab.usearch"
        (folder / meta["file"]).rename(folder / old_file)
        meta_path.unlink()
        (folder / f"{legacy}.json").write_text(json.dumps({**meta, "file": old_file}))
        upgraded = index_over(store, folder)
        assert nearest(upgraded) == before
        assert CountingSource.builds == 0  # the old name still loads
        upgraded._agents[AGENT].saved = None  # as after a write
        upgraded.save()
        assert not (folder / f"{legacy}.json").exists() and not (folder / old_file).exists()  # replaced by the new name
        assert {json.loads(p.read_text())["model"] for p in folder.glob("*.json")} == {model, "other:model"}
        CountingSource.builds = 0
        assert nearest(index_over(store, folder)) == before
        assert CountingSource.builds == 0
    finally:
        store.close()
