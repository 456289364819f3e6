"""A memory the vector tier finds beyond the full-text tier's pool keeps its full-text score:
when the query's words match more memories than the pool holds (a large store, unrelated
memories sharing a word), recall asks the store for the text scores of what the vector tier
found (`Store.text_scores`) instead of fusing it as if it held none of the words."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memento.analysis import query_terms
from memento.app import build_app
from memento.embeddings.hashing import HashEmbedder
from memento.models import AgentScope, CallContext, FragmentType, RecallInput, RememberInput
from memento.settings import Settings
from memento.storage.protocol import SearchFilter


class IslandTrips(HashEmbedder):
    """Hash vectors, but a text about the island boat and a question about the island boat mean
    the same (a stand-in for a model that knows what the words mean)."""

    def _island(self, text: str) -> bool:
        return "island" in text or "crossing" in text

    def embed_passages(self, texts: Sequence[str]) -> Any:
        rows = super().embed_passages(texts)
        same = super().embed_query("the island boat")
        for i, text in enumerate(texts):
            if self._island(text):
                rows[i] = same
        return rows

    def embed_query(self, text: str) -> Any:
        return super().embed_query("the island boat")


TARGET = (
    "The harbour ferry crossing times changed this spring: the morning boat to the island now leaves "
    "at seven from the north pier, so on Saturdays we have to be there with the bikes before a quarter to"
)


def test_a_memory_found_by_meaning_beyond_the_full_text_pool_keeps_its_text_score(tmp_path: Path) -> None:
    settings = Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'm.db'}", EMBEDDING_PROVIDER="hash")
    app = build_app(settings, embedder=IslandTrips(256))
    try:
        ctx = CallContext(agent_id="alice")
        for i in range(60):  # short memories holding the words: BM25 ranks every one above the long target
            app.service.remember(RememberInput(content=f"harbour ferry, ferry {i}", topic=f"t{i % 7}", type=FragmentType.FACT), ctx)
        target = app.service.remember(RememberInput(content=TARGET, topic="travel", type=FragmentType.FACT), ctx).id
        app.service.settle(60)
        question = "harbour ferry"
        pool = [h.id for h in app.store.text_search(AgentScope("alice"), query_terms(question), SearchFilter(), 40)]
        assert len(pool) == 40 and target not in pool  # the full-text tier's own pool leaves the target out
        result = app.service.recall(RecallInput(text=question, limit=5, includeLinks=False, verbose=True), ctx)
        found = {f.id: f for f in result.fragments}
        assert target in found
        assert "full-text rank" in (found[target].recall_reason or "") and "semantic similarity" in (found[target].recall_reason or "")
        assert result.tiers is not None and result.tiers.text == 40  # the report counts the tier's own hits
    finally:
        app.close()
