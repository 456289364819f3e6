"""Reads a recall's ranking needs, made while its query is still being embedded.

With the vector tier beside the lexical ones (beside.py), a recall's calling thread finishes the
keyword and full-text tiers well before the query's embedding is ready (at 10k memories ~4 ms
against ~18). Ranking then reads by id: the conversational context of the best candidates
(their sequence neighbours two steps away and the neighbours' stored vectors, neighbours.py),
their ranking features and the fragments themselves. Most of the final candidates are the
full-text tier's, so the calling thread reads those ahead, in the time it would have waited; the
ranking asks `ReadAhead` instead of the store and reads from the store only what the vector tier
added. What it returns is what the store would: the same calls, split by id.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta

import numpy as np

from ..models import AgentScope, Fragment
from ..storage.protocol import RankFeatures, SearchFilter, Store
from ..storage.sequence import SequenceNeighbours
from .neighbours import CONTEXT_EXPAND, walk


class ReadAhead:
    """One recall's by-id reads, remembered: those made ahead and those made while ranking."""

    def __init__(self, store: Store, scope: AgentScope, filt: SearchFilter) -> None:
        self.store = store
        self.scope = scope
        self.filt = filt
        self._window: timedelta | None = None
        self._sequence: dict[str, SequenceNeighbours | None] = {}
        self._features: dict[str, RankFeatures | None] = {}
        self._vectors: dict[str, np.ndarray | None] = {}
        self._fragments: dict[str, Fragment | None] = {}
        self.ahead = 0  # ids read ahead (for tests and profiles)

    def prefetch(self, ids: Sequence[str], reach: int, window: timedelta | None, stop: Callable[[], bool], limit: int = 0) -> None:
        """Read ahead for `ids` (the full-text tier's hits, best first; as many as context looks
        around for a recall of `limit`) what ranking will ask: their sequence neighbours up to
        `reach` steps (when context is on: `window`), the neighbours' vectors, everyone's ranking
        features, the hits themselves. `stop()` true: the embedding is ready, the rest is read
        when asked for."""
        ids = list(dict.fromkeys(ids))[: max(CONTEXT_EXPAND, limit)]
        if not ids:
            return
        seen = set(ids)
        if window is not None and reach >= 1:
            for _ in walk(self, self.scope, ids, seen, self.filt, window, reach, stop):
                pass
            if stop():
                return
        for read in (
            lambda: self.rank_features(self.scope, sorted(seen)),
            lambda: self.embeddings_of(self.scope, sorted(seen - set(ids))),
            lambda: self.get_many(self.scope, ids),
        ):
            if stop():
                return
            read()
        self.ahead = len(seen)

    def sequence_neighbours(
        self, scope: AgentScope, ids: Sequence[str], filt: SearchFilter, window: timedelta, steps: int = 1
    ) -> dict[str, SequenceNeighbours]:
        if scope is not self.scope or filt is not self.filt or (self._window is not None and window != self._window):
            return self.store.sequence_neighbours(scope, ids, filt, window, steps)
        self._window = window
        wanted = list(dict.fromkeys(ids))
        known = self._sequence

        def named(fid: str) -> tuple[str, ...]:
            nb = known.get(fid)
            return () if nb is None else tuple(n for n in (nb.previous, nb.next) if n is not None)

        missing = [i for i in wanted if i not in known or (steps >= 2 and any(n not in known for n in named(i)))]
        if missing:
            found = self.store.sequence_neighbours(scope, missing, filt, window, steps)
            known.update({i: found.get(i) for i in missing})
            for fid, entry in found.items():  # the entries of the neighbours (steps=2)
                known.setdefault(fid, entry)
        out = {i: nb for i in wanted if (nb := known[i]) is not None}
        if steps >= 2:
            for fid in wanted:
                for n in named(fid):
                    if n not in out and (far := known.get(n)) is not None:
                        out[n] = far
        return out

    def rank_features(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, RankFeatures]:
        if scope is not self.scope:
            return self.store.rank_features(scope, ids)
        missing = [i for i in dict.fromkeys(ids) if i not in self._features]
        if missing:
            found = self.store.rank_features(scope, missing)
            self._features.update({i: found.get(i) for i in missing})
        return {i: f for i in ids if (f := self._features[i]) is not None}

    def embeddings_of(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, np.ndarray]:
        if scope is not self.scope:
            return self.store.embeddings_of(scope, ids)
        missing = [i for i in dict.fromkeys(ids) if i not in self._vectors]
        if missing:
            found = self.store.embeddings_of(scope, missing)
            self._vectors.update({i: found.get(i) for i in missing})
        return {i: v for i in ids if (v := self._vectors[i]) is not None}

    def get_many(self, scope: AgentScope, ids: Sequence[str]) -> list[Fragment]:
        if scope is not self.scope:
            return self.store.get_many(scope, ids)
        missing = [i for i in dict.fromkeys(ids) if i not in self._fragments]
        if missing:
            found = {f.id: f for f in self.store.get_many(scope, missing)}
            self._fragments.update({i: found.get(i) for i in missing})
        return [f for i in dict.fromkeys(ids) if (f := self._fragments[i]) is not None]
