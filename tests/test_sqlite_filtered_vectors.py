"""A filtered vector search on SQLite stays cheap as the store grows. A topic among fifty at a
million memories went to an exact scan that the planner drove from the stored vectors, reading
every vector in the store to find the topic's rows (1.4 s a recall). Now the graph's wider
neighbourhood is looked through first, and the exact scan, when still needed, finds the filter's
rows through the fragments' own indexes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memento.app import App, build_app
from memento.embeddings.hashing import HashEmbedder
from memento.models import AgentScope, CallContext, FragmentType, RememberInput
from memento.settings import Settings
from memento.storage.protocol import SearchFilter

EMBEDDER = HashEmbedder(64)


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    settings = Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'v.db'}", EMBEDDING_PROVIDER="hash", MEMENTO_SQLITE_SYNCHRONOUS="OFF")
    ctx = CallContext(agent_id="alice")
    built = build_app(settings, embedder=EMBEDDER)
    try:
        for i in range(600):
            topic = "rare" if i % 120 == 0 else f"topic-{i % 20}"
            built.service.remember(
                RememberInput(content=f"note {i} about the harbour and boat {i % 37}", topic=topic, type=FragmentType.FACT), ctx
            )
        assert built.service.settle(60)
    finally:
        built.close()  # statistics are gathered on close (PRAGMA optimize), as in use
    app = build_app(settings, embedder=EMBEDDER)
    yield app
    app.close()


def traced(app: App, topic: str, limit: int) -> tuple[list[str], list[str]]:
    """The vector tier's hits for `topic` and the statements it ran."""
    conn = app.store.db.reader()  # type: ignore[attr-defined]
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        hits = app.store.vector_search(AgentScope("alice"), EMBEDDER.embed_query("the harbour boat"), SearchFilter(topic=topic), limit)
    finally:
        conn.set_trace_callback(None)
    return [h.id for h in hits], statements


def topic_ids(app: App, topic: str) -> set[str]:
    conn = app.store.db.reader()  # type: ignore[attr-defined]
    return {r[0] for r in conn.execute("SELECT id FROM fragments WHERE topic = ?", (topic,))}


def test_a_topic_among_many_is_found_in_the_graphs_wider_neighbourhood(app: App) -> None:
    ids, statements = traced(app, "topic-3", 10)
    assert len(ids) == 10 and set(ids) <= topic_ids(app, "topic-3")
    assert not [s for s in statements if "fragment_embeddings" in s]  # no stored vector read


def test_a_filter_too_narrow_for_the_graph_reads_its_own_rows_through_their_index(app: App) -> None:
    ids, statements = traced(app, "rare", 10)
    assert set(ids) == topic_ids(app, "rare") and len(ids) == 5  # every one of the topic's five
    conn = app.store.db.reader()  # type: ignore[attr-defined]
    (statement,) = [s for s in statements if "fragment_embeddings" in s]
    plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + statement)]
    assert plan[0].startswith("SEARCH f USING INDEX"), plan  # the topic's rows first ...
    assert not any(step.startswith("SCAN e") for step in plan), plan  # ... never every stored vector
