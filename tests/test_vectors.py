"""The per-agent vector index: exact and HNSW paths, persistence and rebuild."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from memento.app import build_app
from memento.embeddings.hashing import HashEmbedder
from memento.models import AgentScope, CallContext, ForgetInput, RecallInput, RememberInput
from memento.settings import Settings
from memento.storage.protocol import SearchFilter

TEXTS = [f"note {i} about {topic}" for i, topic in enumerate(
    ["postgres vacuum", "redis eviction", "kafka lag", "nginx timeouts", "python asyncio", "docker layers",
     "git rebase", "terraform state", "grafana alerts", "linux cgroups"] * 4)]


def build(tmp_path: Path, ann_threshold: int = 5000):  # type: ignore[no-untyped-def]
    settings = Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'v.db'}", MEMENTO_ANN_THRESHOLD=ann_threshold)
    return build_app(settings, embedder=HashEmbedder(128))


def fill(app) -> None:  # type: ignore[no-untyped-def]
    for text in TEXTS:
        app.service.remember(RememberInput(content=text, topic="ops", type="fact", agentId="agent-v"), CallContext())


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
        assert other["fragments"] == []
        assert app.store.vectors.size("agent-w") == 0
    finally:
        app.close()


def test_filtered_vector_search_falls_back_to_exact_over_the_filter(tmp_path: Path) -> None:
    app = build(tmp_path, ann_threshold=0)
    try:
        fill(app)
        app.service.remember(RememberInput(content="kafka lag on the rare topic", topic="rare", type="fact", agentId="agent-v"), CallContext())
        vector = app.embedder.embed_query("kafka lag")
        hits = app.store.vector_search(AgentScope("agent-v"), vector, SearchFilter(topic="rare"), 5)
        assert len(hits) == 1
        assert np.isfinite(hits[0].score)
    finally:
        app.close()
