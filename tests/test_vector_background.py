"""An agent's HNSW graph that has to be built (a large import, a store without a saved graph) is
built beside the searches: they scan the agent's vectors exactly meanwhile, other agents' searches
wait for nothing, and the graph, once built, catches up with what was written during the build and
is saved. (At a million memories the build takes ~25 minutes; it used to hold every search of
every agent for that long.)"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from usearch.index import Index

from memento.app import App, build_app
from memento.embeddings.hashing import HashEmbedder
from memento.models import AgentScope, CallContext, ForgetInput, ForgetMode, RecallInput, RememberInput
from memento.settings import Settings
from memento.storage import vectors as vectors_module
from memento.storage.protocol import SearchFilter
from memento.storage.sqlite_vectors import SQLiteVectorSource

BIG, SMALL = "agent-big", "agent-small"
TOPICS = ["postgres vacuum", "redis eviction", "kafka lag", "nginx timeouts", "python asyncio", "docker layers", "git rebase", "grafana"]


def settings(path: Path) -> Settings:
    return Settings(DATABASE_URL=f"sqlite:///{path}", MEMENTO_ANN_THRESHOLD=0)


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """A store of 64 memories for BIG and 8 for SMALL, closed, its saved graphs removed (as a
    large import leaves a store: vectors in the database, no graph yet)."""
    path = tmp_path / "b.db"
    app = build_app(settings(path), embedder=HashEmbedder(128))
    try:
        for i in range(64):
            app.service.remember(RememberInput(content=f"note {i} on {TOPICS[i % 8]}", topic="ops", type="fact"), CallContext(agent_id=BIG))
        for i in range(8):
            app.service.remember(RememberInput(content=f"small {i} on {TOPICS[i]}", topic="ops", type="fact"), CallContext(agent_id=SMALL))
        assert app.service.settle()
    finally:
        app.close()
    shutil.rmtree(path.with_name(path.name + ".vectors"))
    return path


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Holds the background build's first addition to its graph until set."""
    opened = threading.Event()
    real_add = Index.add

    def add(self: Index, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == "memento-vector-build":
            assert opened.wait(30)
        return real_add(self, *args, **kwargs)

    monkeypatch.setattr(Index, "add", add)
    yield opened
    opened.set()


def opened(path: Path) -> App:
    app = build_app(settings(path), embedder=HashEmbedder(128))
    assert app.store.vectors is not None  # type: ignore[attr-defined]
    app.store.vectors.background_build = 20  # type: ignore[attr-defined]
    return app


def nearest(app: App, agent: str, query: str, k: int = 5) -> list[str]:
    vector = app.embedder.embed_query(query)  # type: ignore[union-attr]
    found = app.store.vector_search(AgentScope(agent), vector, SearchFilter(), k)
    return [str(app.store.get_many(AgentScope(agent), [h.id])[0].content) for h in found]


def similarities(app: App, agent: str, query: str, k: int = 5) -> list[float]:
    vector = app.embedder.embed_query(query)  # type: ignore[union-attr]
    return [h.score for h in app.store.vector_search(AgentScope(agent), vector, SearchFilter(), k)]


def exact(app: App, agent: str, query: str, k: int = 5) -> list[float]:
    """The similarities of the k nearest by a plain scan of every stored vector (what a search
    must find; texts that differ by a number only tie, so their order is not compared)."""
    keys, vectors = zip(*app.store.vectors.source.load(agent), strict=True)  # type: ignore[attr-defined]
    matrix = np.concatenate(vectors)
    matrix = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    q = app.embedder.embed_query(query)  # type: ignore[union-attr]
    return sorted((matrix @ (q / np.linalg.norm(q))).tolist(), reverse=True)[:k]


def same(found: list[float], expected: list[float]) -> bool:
    return len(found) == len(expected) and all(abs(a - b) < 2e-3 for a, b in zip(found, expected, strict=True))  # f16 in the graph


def test_searches_are_exact_while_the_graph_builds_and_it_catches_up_and_is_saved_when_done(
    store_path: Path, gate: threading.Event, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(vectors_module, "BUILD_CHUNK", 8)  # progress is logged a tenth at a time
    caplog.set_level(logging.INFO, logger="memento.storage.vectors")
    app = opened(store_path)
    try:
        vectors = app.store.vectors  # type: ignore[attr-defined]
        assert same(similarities(app, BIG, "kafka lag"), exact(app, BIG, "kafka lag"))  # the graph is not there: an exact scan
        assert not vectors.ready(BIG, 0) and vectors.size(BIG) == 64
        assert same(similarities(app, SMALL, "redis eviction"), exact(app, SMALL, "redis eviction"))  # built at once: 8 vectors
        assert vectors.ready(SMALL, 0)
        written = app.service.remember(
            RememberInput(content="the vault unseals at boot", topic="ops", type="fact"), CallContext(agent_id=BIG)
        )
        assert app.service.settle()
        saved = store_path.with_name(store_path.name + ".vectors") / f"{vectors._prefix(BIG)}.json"
        vectors.save()
        assert not saved.exists()  # nothing saved of a graph not built yet
        gate.set()
        assert vectors.ready(BIG, 30)
        assert nearest(app, BIG, "the vault unseals at boot")[0] == "the vault unseals at boot"  # written during the build
        assert vectors.size(BIG) == 65 and vectors.held(BIG, np.array([vectors_key(app, written.id)], dtype=np.uint64)) == 1
        assert same(similarities(app, BIG, "kafka lag"), exact(app, BIG, "kafka lag"))
        assert saved.exists()  # the built graph saved at once
        logged = [r.getMessage() for r in caplog.records if r.name == "memento.storage.vectors"]
        assert any("building its graph over 64 vectors in the background" in m for m in logged), logged
        assert any("graph 48/64 vectors (75%)" in m for m in logged), logged
        assert any("graph built over 64 vectors" in m for m in logged), logged
    finally:
        app.close()
    again = opened(store_path)
    try:
        assert again.store.vectors.ready(BIG, 0)  # type: ignore[attr-defined]  # loaded, not built again
        assert nearest(again, BIG, "the vault unseals at boot")[0] == "the vault unseals at boot"
    finally:
        again.close()


def vectors_key(app: App, memory_id: str) -> int:
    return int(app.store.db.reader().execute("SELECT seq FROM fragments WHERE id = ?", (memory_id,)).fetchone()[0])  # type: ignore[attr-defined]


def test_opening_one_agent_s_index_holds_up_no_other_agent(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index being opened (its vectors read, a small graph built) used to hold the lock of every
    agent's index, so a search of any agent waited for it."""
    release, reading = threading.Event(), threading.Event()
    real_load = SQLiteVectorSource.load

    def load(self: SQLiteVectorSource, agent: str) -> Any:
        if agent == BIG:
            reading.set()
            assert release.wait(30)
        return real_load(self, agent)

    monkeypatch.setattr(SQLiteVectorSource, "load", load)
    app = opened(store_path)
    try:
        found: list[list[str]] = []
        big = threading.Thread(target=lambda: found.append(nearest(app, BIG, "kafka lag")))
        big.start()
        assert reading.wait(30)
        assert same(similarities(app, SMALL, "redis eviction"), exact(app, SMALL, "redis eviction"))  # while BIG's is being read
        assert big.is_alive()
        release.set()
        big.join(30)
        assert found and found[0][0].endswith("kafka lag")
    finally:
        release.set()
        app.close()


def test_a_rebuild_during_the_build_starts_over_and_a_close_calls_the_build_off(store_path: Path, gate: threading.Event) -> None:
    """An erasure rebuilds the agent's index from the database as it is now: a build under way
    (with the erased vectors in it) is called off and another starts. A store closed during a
    build saves no graph, and waits for the chunk being added."""
    app = opened(store_path)
    try:
        vectors = app.store.vectors  # type: ignore[attr-defined]
        assert nearest(app, BIG, "git rebase")
        first = vectors._agents[BIG].building
        assert first is not None
        assert vectors.rebuild(BIG) == 1
        second = vectors._agents[BIG].building
        assert second is not None and second is not first and first.stop.is_set()
        gate.set()
        assert first.done.wait(30) and vectors.ready(BIG, 30)
        assert vectors.size(BIG) == 64
        assert same(similarities(app, BIG, "git rebase"), exact(app, BIG, "git rebase"))
    finally:
        app.close()
    folder = store_path.with_name(store_path.name + ".vectors")
    shutil.rmtree(folder)
    gate.clear()
    closing = opened(store_path)
    vectors = closing.store.vectors  # type: ignore[attr-defined]
    assert nearest(closing, BIG, "git rebase")
    building = vectors._agents[BIG].building
    assert building is not None
    threading.Timer(0.5, gate.set).start()  # the chunk the close waits for
    closing.close()
    assert building.done.is_set()
    assert not (folder / f"{vectors._prefix(BIG)}.json").exists()


def test_a_hard_forget_in_a_large_agent_removes_the_saved_graph_at_once_and_builds_without_it(
    store_path: Path, gate: threading.Event
) -> None:
    """Nothing of an erased memory's vector may stay. A large agent's graph is not rebuilt while
    the forget waits (~25 minutes at a million): its saved copy goes at once, its searches scan
    the vectors as they are after the erasure, and the graph built from them is saved when done."""
    app = opened(store_path)
    folder = store_path.with_name(store_path.name + ".vectors")
    try:
        vectors = app.store.vectors  # type: ignore[attr-defined]
        victim = app.service.recall(RecallInput(text="note 3 on nginx timeouts", limit=1), CallContext(agent_id=BIG)).fragments[0]
        assert victim.content == "note 3 on nginx timeouts"
        key = vectors_key(app, victim.id)
        gate.set()
        assert vectors.ready(BIG, 30)
        saved = folder / f"{vectors._prefix(BIG)}.json"
        assert saved.exists()
        gate.clear()
        result = app.service.forget(ForgetInput(id=victim.id, mode=ForgetMode.HARD), CallContext(agent_id=BIG))
        assert result.deleted == [victim.id]
        assert not saved.exists() and not list(folder.glob(f"{vectors._prefix(BIG)}*.usearch"))  # at once
        assert not vectors.ready(BIG, 0)  # built in the background
        assert vectors.held(BIG, np.array([key], dtype=np.uint64)) == 0 and vectors.size(BIG) == 63
        assert "note 3 on nginx timeouts" not in nearest(app, BIG, "note 3 on nginx timeouts", 10)
        gate.set()
        assert vectors.ready(BIG, 30) and saved.exists()
        assert vectors.held(BIG, np.array([key], dtype=np.uint64)) == 0 and vectors.size(BIG) == 63
    finally:
        gate.set()
        app.close()
    again = opened(store_path)
    try:
        assert again.store.vectors.ready(BIG, 0) and again.store.vectors.size(BIG) == 63  # type: ignore[attr-defined]
    finally:
        again.close()


EXITS = """
import sys
import time
from pathlib import Path
from memento.embeddings.hashing import HashEmbedder
from memento.storage.sqlite import SQLiteStore
store = SQLiteStore(Path(sys.argv[1]), embedding_model=HashEmbedder(384).name, dimensions=384)
store.vectors.background_build = 100
store.vectors.search("agent-p", HashEmbedder(384).embed_query("memory about topic 3"), 5)
assert store.vectors._agents["agent-p"].building is not None
print("building", flush=True)
time.sleep(0.3)  # the build into its chunks
"""  # and exits without closing the store


def test_a_process_that_exits_during_a_build_exits_cleanly(tmp_path: Path) -> None:
    """usearch adds vectors on threads of its own: a process that exited while they ran was
    aborted ("terminate called without an active exception"). At exit the builds are called off
    and the chunk being added is waited for."""
    from test_vector_params import filled_store

    path = tmp_path / "x.db"
    filled_store(path, count=20_000, dim=384).close()
    for _ in range(2):  # where it aborted, it did in most runs, not every one
        done = subprocess.run([sys.executable, "-c", EXITS, str(path)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "building" in done.stdout and "terminate called" not in done.stderr
