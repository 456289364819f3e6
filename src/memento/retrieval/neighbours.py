"""Conversational context in recall: a memory is read with the ones written beside it.

Memories written one after another in a conversation lean on each other: the answer ("We
rented a flat near the station") rarely repeats the question it answers ("Where did you and
Sam decide to live?"), and the words a recall shares with the conversation are often in the
turn before. So a candidate leans on the memory written just before it and the one written
just after it: its relevance becomes at least the blend
    contextBefore · (the one before's) + (1 − contextBefore) · (its own), and likewise with
    contextAfter and the one after
(MEMORY_CONFIG.ranking; 0.7 and 0.4 by default). A neighbour only ever lends what it has more of:
the best match of a conversation keeps its place, and the turn that answers it rises next to it.
Neighbours in the sense of storage/sequence.py (same namespace, topic and
session, created within contextWindowMinutes). A neighbour that no tier found, next to a
strong candidate, joins the candidates with its own similarity to the query (its stored
vector, placed on the semantic tier's scale) plus that context.

A candidate reads the `contextReach` (2) memories written before it and as many after it,
each step away lending CONTEXT_DECAY as much as the one before (the question two turns up
still lends to its answer, a little less than the turn right after it). Every
candidate of the tiers (the best CONTEXT_EXPAND when there are more) looks for its neighbours:
one statement per two steps of `contextReach` and one read of stored vectors per recall, whatever
the store's size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import Protocol

import numpy as np

from ..models import AgentScope
from ..settings import RankingConfig
from ..storage.protocol import SearchFilter
from ..storage.sequence import SequenceNeighbours
from .rank import Candidate, Scale

# Candidates that look for their neighbours, best first (at least the recall's limit). The
# neighbour reads, the stored vectors they bring in and the candidates ranked grow with the
# number. On the LoCoMo dev split (bench/locomo.py, docs/retrieval.md) 40 and 100 ranked as 300
# did at limit 50; at limit 10, 30 ranks as 60 did (R@5 69.1, R@10 78.2; 20: 68.9 / 78.2, 10:
# 68.2 / 77.4), and at limit 50 the 50 it then takes as 60 did (R@5 69.6, R@10 78.5 / 78.4).
CONTEXT_EXPAND = 30
CONTEXT_DECAY = 0.85  # each further step away lends this much less (the nearest turn first)
STEPS_PER_READ = 2  # steps away from the candidates one sequence_neighbours statement covers


class ContextReads(Protocol):
    """What context reads: the store, or a recall's ReadAhead over it (readahead.py)."""

    def sequence_neighbours(
        self, scope: AgentScope, ids: Sequence[str], filt: SearchFilter, window: timedelta, steps: int = 1
    ) -> dict[str, SequenceNeighbours]: ...
    def embeddings_of(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, np.ndarray]: ...


def walk(
    store: ContextReads,
    scope: AgentScope,
    frontier: Sequence[str],
    seen: set[str],
    filt: SearchFilter,
    window: timedelta,
    reach: int,
    stop: Callable[[], bool] = lambda: False,
) -> Iterator[dict[str, SequenceNeighbours]]:
    """The sequence entries of `frontier`, then of the memories they name that are not in `seen`
    yet, and so on, `reach` steps away (one step: one set of entries). STEPS_PER_READ steps come
    from one statement (`steps=2`). `seen` grows with every memory reached; `stop()` true ends the walk
    before its next read."""
    left, frontier = reach, list(frontier)
    while left > 0 and frontier:
        if stop():
            return
        steps = min(STEPS_PER_READ, left)
        found = store.sequence_neighbours(scope, frontier, filt, window, steps)
        for _ in range(steps):
            entries = {fid: found[fid] for fid in frontier if fid in found}
            yield entries
            frontier = sorted({n for nb in entries.values() for n in (nb.previous, nb.next) if n is not None} - seen)
            seen.update(frontier)
            left -= 1
            if not frontier:
                return


def add_context(
    store: ContextReads,
    scope: AgentScope,
    cands: dict[str, Candidate],
    filt: SearchFilter,
    vector: np.ndarray | None,
    scale: Scale | None,
    cfg: RankingConfig,
    limit: int,
    threshold: float | None = None,
    admit: bool = True,
) -> None:
    """Add to `cands` (in place) the context of their neighbours, and the neighbours worth it.
    With a similarity `threshold` (recall's), a neighbour no tier found joins only when its own
    similarity reaches it: it is then a semantic result like any other."""
    before, after, reach = cfg.contextBefore, cfg.contextAfter, cfg.contextReach
    if (before <= 0 and after <= 0) or reach < 1 or not cands:
        return
    window = timedelta(minutes=cfg.contextWindowMinutes)
    own = {cid: c.relevance for cid, c in cands.items()}
    previous: dict[str, str] = {}
    following: dict[str, str] = {}
    frontier = [c.id for c in sorted(cands.values(), key=lambda c: -c.relevance)[: max(CONTEXT_EXPAND, limit)]]
    seen = set(cands)
    for found in walk(store, scope, frontier, seen, filt, window, reach):  # one statement per two steps away
        for fid, nb in found.items():
            if nb.previous is not None:
                previous[fid], following[nb.previous] = nb.previous, fid
            if nb.next is not None:
                following[fid], previous[nb.next] = nb.next, fid
    fresh = sorted(seen - set(cands))
    similarity: dict[str, float] = {}
    stored = store.embeddings_of(scope, fresh) if fresh and vector is not None and scale is not None else {}
    for fid in fresh:
        v = stored.get(fid)
        if v is not None and vector is not None and scale is not None:
            similarity[fid] = float(np.dot(v, vector))
        own[fid] = scale.of(similarity[fid]) if scale is not None and fid in similarity else 0.0

    def leaned(fid: str, mine: float) -> float:
        best = mine
        for weight, step in ((before, previous), (after, following)):
            at = fid
            for _ in range(reach):
                nxt = step.get(at)
                if nxt is None:
                    break
                best = max(best, weight * own.get(nxt, 0.0) + (1 - weight) * mine)
                weight *= CONTEXT_DECAY
                at = nxt
        return best

    for fid in seen:
        mine = own.get(fid, 0.0)
        context = leaned(fid, mine) - mine
        if context <= 1e-12:
            continue
        cand = cands.get(fid)
        if cand is None and (not admit or (threshold is not None and similarity.get(fid, -1.0) < threshold)):
            continue
        if cand is None:
            cand = cands[fid] = Candidate(fid, relevance=mine, matched={"context": 1}, similarity=similarity.get(fid))
        cand.relevance += context
        cand.context = context
