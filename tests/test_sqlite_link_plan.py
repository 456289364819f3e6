"""The SQLite store finds a candidate set's links through the link table's indexes, however many
candidates are asked and however small the store (recall asks for the superseding links of its
~200 candidates on every call). Left to choose, SQLite scanned every fragment of a 1,000-memory
store that had no link yet once ~200 ids were asked: ~10 ms a recall, for nothing."""

from __future__ import annotations

from pathlib import Path

from memento.app import build_app
from memento.embeddings.hashing import HashEmbedder
from memento.models import AgentScope, CallContext, FragmentType, LinkInput, RelationType, RememberInput
from memento.settings import Settings


def test_a_large_candidate_set_finds_its_links_through_the_link_indexes(tmp_path: Path) -> None:
    settings = Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'links.db'}", EMBEDDING_PROVIDER="hash", MEMENTO_SQLITE_SYNCHRONOUS="OFF")
    ctx = CallContext(agent_id="alice")
    app = build_app(settings, embedder=HashEmbedder(64))
    try:
        ids = [
            app.service.remember(
                RememberInput(content=f"note {i} about the harbour and boat {i % 37}", topic="t", type=FragmentType.FACT), ctx
            ).id
            for i in range(1000)
        ]
    finally:
        app.close()  # the store's statistics are gathered on close (PRAGMA optimize), as in use
    app = build_app(settings, embedder=HashEmbedder(64))
    try:
        store, scope = app.store, AgentScope("alice")
        asked = ids[:200]
        conn = store.db.reader()  # type: ignore[attr-defined]
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        try:
            assert store.neighbours(scope, asked, (RelationType.SUPERSEDED_BY,), 410) == []
        finally:
            conn.set_trace_callback(None)
        (statement,) = [s for s in statements if "fragment_links" in s]
        plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + statement)]
        assert not any(step.startswith("SCAN f") for step in plan), plan  # the links are found through the ids
        app.service.link(LinkInput(fromId=ids[3], toId=ids[900], relationType=RelationType.SUPERSEDED_BY), ctx)
        app.service.link(LinkInput(fromId=ids[950], toId=ids[5], relationType=RelationType.SUPERSEDED_BY), ctx)
        app.service.link(LinkInput(fromId=ids[7], toId=ids[8], relationType=RelationType.RELATED), ctx)
        found = store.neighbours(scope, asked, (RelationType.SUPERSEDED_BY,), 410)
        assert sorted((link.from_id, link.to_id, f.id) for link, f in found) == sorted(
            [(ids[3], ids[900], ids[900]), (ids[950], ids[5], ids[950])]
        )
    finally:
        app.close()
