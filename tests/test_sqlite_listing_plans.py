"""A filtered listing on SQLite walks the namespace's index in the listing's order a bounded way,
and when the walk holds too few rows that pass, sorts the rows that pass instead (from whichever
index the planner takes for the filter: its statistics decide, so only the walk's plan is
asserted here). These tests read SQLite's plans for the statements a listing runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlite_helpers import reopened_store

from memento.app import App
from memento.embeddings.hashing import HashEmbedder
from memento.models import AgentScope, FragmentType, RememberInput
from memento.storage.protocol import SearchFilter

EMBEDDER = HashEmbedder(64)
ALICE = AgentScope("alice")


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    notes = (
        RememberInput(
            content=f"note {i} on the harbour", topic=f"topic-{i % 9}", type=FragmentType.DECISION if i % 500 == 7 else FragmentType.FACT
        )
        for i in range(1_500)
    )
    with reopened_store(tmp_path / "l.db", EMBEDDER, notes) as app:
        yield app


def plans(app: App, filt: SearchFilter, limit: int) -> tuple[list[str], dict[str, str]]:
    """The listing's ids and, for each seq-choosing statement it ran, SQLite's plan for it."""
    conn = app.store.db.reader()  # type: ignore[attr-defined]
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        ids = [f.id for f in app.store.list_fragments(ALICE, filt, limit)]
    finally:
        conn.set_trace_callback(None)
    chosen = [s for s in statements if "FROM fragments" in s and not s.startswith("SELECT COUNT(*)")]
    return ids, {s: " | ".join(r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {s}")) for s in chosen}


def test_a_filter_most_rows_pass_is_answered_from_the_ordered_walk(app: App) -> None:
    ids, planned = plans(app, SearchFilter(type=FragmentType.FACT), 50)
    assert len(ids) == 50
    walks = [p for s, p in planned.items() if "fragments w " in s]
    assert walks and all("fragments_listing" in p for p in walks), planned
    assert not any("ORDER BY +f." in s for s in planned), planned  # nothing sorted


@pytest.mark.parametrize("filt", [SearchFilter(source="nowhere"), SearchFilter(type=FragmentType.DECISION)])
def test_a_filter_few_rows_pass_is_sorted_after_a_bounded_walk(app: App, filt: SearchFilter) -> None:
    ids, planned = plans(app, filt, 50)
    expected = [f.id for f in app.store.list_fragments(ALICE, SearchFilter(), 2_000) if filt.matches(f)][:50]
    assert ids == expected
    walks = [p for s, p in planned.items() if "fragments w " in s]
    sorts = [p for s, p in planned.items() if "ORDER BY +f." in s]
    assert walks and all("fragments_listing" in p for p in walks), planned
    # the sort is not a walk of the listing index in its order (which reads the whole namespace)
    assert sorts and all("TEMP B-TREE FOR ORDER BY" in p for p in sorts), planned
