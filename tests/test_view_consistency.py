"""Views (MCP resources) show settled access statistics, so two reads never differ only because
the batched access flush happened to land between them (the isolation matrix's snapshots)."""

from __future__ import annotations

import threading

import pytest

from memento.models import CallContext, RecallInput, RememberInput
from memento.service import MemoryService

pytestmark = pytest.mark.backends("sqlite", "postgres")

CTX = CallContext(session_id="s-1")


def test_a_view_after_a_recall_shows_that_recall(service: MemoryService) -> None:
    fid = service.remember(RememberInput(content="Backups run nightly", topic="ops", type="fact", keywords=["backups"]), CTX).id
    # The vector is stored off the write path: once it is, no view read below can differ from
    # another by `hasEmbedding` alone (the embedding worker landing between two reads).
    assert service.settle()
    assert service.views.get_fragment(fid, CTX).access_count == 0
    assert service.recall(RecallInput(keywords=["backups"]), CTX).count == 1
    seen = service.views.get_fragment(fid, CTX)
    assert seen.access_count == 1 and seen.accessed_at is not None
    assert service.views.topic_fragments("ops", CTX) == [seen]
    assert service.views.list_fragments_page(CTX, None, 10)[0] == [seen]


def test_a_view_waits_for_a_flush_already_under_way(service: MemoryService) -> None:
    """A flush another thread took the buffer for is finished before a view reads."""
    ids = [
        service.remember(RememberInput(content=f"fact number {i}", topic="ops", type="fact", keywords=["fact"]), CTX).id for i in range(20)
    ]
    assert service.settle()  # no vector write holds a row the flush would skip (PostgreSQL: SKIP LOCKED)
    for done in range(1, 6):
        service.recall(RecallInput(keywords=["fact"], limit=20, tokenBudget=10_000), CTX)  # all 20, whatever their ids tokenise to
        flusher = threading.Thread(target=service.store.flush_access)
        flusher.start()
        counts = {f.id: f.access_count for f in service.views.topic_fragments("ops", CTX)}
        flusher.join()
        assert set(counts.values()) == {done}, counts
    assert {service.views.get_fragment(i, CTX).access_count for i in ids} == {5}
