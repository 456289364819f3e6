"""A filtered vector search on SQLite stays cheap as the store grows. A topic among fifty at a
million memories went to an exact scan that the planner drove from the stored vectors, reading
every vector in the store to find the topic's rows (1.4 s a recall). Now the graph's wider
neighbourhood is looked through first, and the exact scan, when still needed, finds the filter's
rows through the fragments' own indexes. A filter with few rows that the first look rarely meets
(a time range) skips the wider look: its rows are ranked exactly at once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sqlite_helpers import reopened_store

from memento.app import App
from memento.embeddings.hashing import HashEmbedder
from memento.models import AgentScope, FragmentType, RememberInput
from memento.storage import sqlite_search
from memento.storage.protocol import SearchFilter
from memento.storage.sqlite_sql import parse_ts
from memento.storage.vectors import VectorIndex

EMBEDDER = HashEmbedder(64)


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    notes = (
        RememberInput(
            content=f"note {i} about the harbour and boat {i % 37}",
            topic="rare" if i % 120 == 0 else f"topic-{i % 20}",
            type=FragmentType.FACT,
        )
        for i in range(600)
    )
    with reopened_store(tmp_path / "v.db", EMBEDDER, notes) as app:
        yield app


def traced(app: App, filt: SearchFilter | str, limit: int) -> tuple[list[str], list[str], list[int]]:
    """The vector tier's hits for `filt` (a topic by name), the statements it ran and how many
    neighbours it asked the graph for, look by look."""
    filt = SearchFilter(topic=filt) if isinstance(filt, str) else filt
    conn = app.store.db.reader()  # type: ignore[attr-defined]
    vectors: VectorIndex = app.store.search.vectors  # type: ignore[attr-defined]
    statements: list[str] = []
    looks: list[int] = []
    search = vectors.search

    def counted(agent: str, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        looks.append(k)
        return search(agent, vector, k)

    conn.set_trace_callback(statements.append)
    vectors.search = counted  # type: ignore[method-assign]
    try:
        hits = app.store.vector_search(AgentScope("alice"), EMBEDDER.embed_query("the harbour boat"), filt, limit)
    finally:
        conn.set_trace_callback(None)
        del vectors.search
    return [h.id for h in hits], statements, looks


def topic_ids(app: App, topic: str) -> set[str]:
    conn = app.store.db.reader()  # type: ignore[attr-defined]
    return {r[0] for r in conn.execute("SELECT id FROM fragments WHERE topic = ?", (topic,))}


def vector_reads(statements: list[str]) -> list[str]:
    """The statements that read stored vectors (opening an agent's index also counts its vectors,
    from their index)."""
    return [s for s in statements if "fragment_embeddings" in s and not s.startswith("SELECT COUNT(*) FROM fragment_embeddings")]


def test_a_topic_among_many_is_found_in_the_graphs_wider_neighbourhood(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_search, "EXACT_FIRST", 20)  # the topic's 30 rows: too many to read (as 20,000 at a million)
    ids, statements, looks = traced(app, "topic-3", 10)
    assert len(ids) == 10 and set(ids) <= topic_ids(app, "topic-3")
    assert looks[-1] == sqlite_search.NARROWED_REACH
    assert not vector_reads(statements)  # no stored vector read


def test_a_filter_with_few_rows_is_ranked_exactly_without_the_wider_look(app: App) -> None:
    """A time range of ~2 % of the store that the first look (the 40 nearest) does not meet: the
    wider look would meet too few of it at a million memories, so the range's own rows are
    counted and, being few, ranked by their vectors at once."""
    conn = app.store.db.reader()  # type: ignore[attr-defined]
    rows = [(r[0], r[1]) for r in conn.execute("SELECT id, created_at FROM fragments ORDER BY created_at, seq")]
    query = EMBEDDER.embed_query("the harbour boat")
    vectors = app.store.embeddings_of(AgentScope("alice"), [i for i, _ in rows])
    sims = {i: round(float(vectors[i] @ query), 5) for i, _ in rows}
    nearest = set(sorted(sims, key=lambda i: -sims[i])[:40])
    start = next(k for k in range(1, len(rows) - 16) if not {i for i, _ in rows[k : k + 16]} & nearest)
    first, last = rows[start - 1][1], rows[start + 16][1]  # the 16 rows between, exclusive
    within = [r[0] for r in conn.execute("SELECT id FROM fragments WHERE created_at > ? AND created_at < ?", (first, last))]
    ids, _, looks = traced(app, SearchFilter(created_after=parse_ts(first), created_before=parse_ts(last)), 10)
    assert sqlite_search.NARROWED_REACH not in looks, looks
    assert len(within) >= 10 and len(ids) == 10 and set(ids) <= set(within)
    assert [sims[i] for i in ids] == sorted((sims[i] for i in within), reverse=True)[:10]  # the range's best, in order


def test_a_filter_too_narrow_for_the_graph_reads_its_own_rows_through_their_index(app: App) -> None:
    ids, statements, _ = traced(app, "rare", 10)
    assert set(ids) == topic_ids(app, "rare") and len(ids) == 5  # every one of the topic's five
    conn = app.store.db.reader()  # type: ignore[attr-defined]
    (statement,) = vector_reads(statements)
    plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + statement)]
    assert plan[0].startswith("SEARCH f USING INDEX"), plan  # the topic's rows first ...
    assert not any(step.startswith("SCAN e") for step in plan), plan  # ... never every stored vector
