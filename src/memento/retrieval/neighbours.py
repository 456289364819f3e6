"""Conversational context in recall: a memory is read with the ones written beside it.

Memories written one after another in a conversation lean on each other: the answer ("We
rented a flat near the station") rarely repeats the question it answers ("Where did you and
Sam decide to live?"), and the words a recall shares with the conversation are often in the
turn before. So a candidate's relevance grows by a share of the relevance of the memory
written just before it (MEMORY_CONFIG.ranking.contextBefore) and just after it
(contextAfter): neighbours in the sense of storage/sequence.py (same namespace, topic and
session, created within contextWindowMinutes). A neighbour that no tier found, next to a
strong candidate, joins the candidates with its own similarity to the query (its stored
vector, placed on the semantic tier's scale) plus that context.

Every candidate of the tiers (the best CONTEXT_EXPAND when there are more) looks for its
neighbours: two statements per recall, whatever the store's size.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np

from ..models import AgentScope
from ..settings import RankingConfig
from ..storage.protocol import SearchFilter, Store
from .rank import Candidate, Scale

CONTEXT_EXPAND = 300  # candidates that look for their neighbours, best first


def add_context(
    store: Store,
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
    before, after = cfg.contextBefore, cfg.contextAfter
    if (before <= 0 and after <= 0) or not cands:
        return
    window = timedelta(minutes=cfg.contextWindowMinutes)
    own = {cid: c.relevance for cid, c in cands.items()}
    top = sorted(cands.values(), key=lambda c: -c.relevance)[: max(CONTEXT_EXPAND, limit)]
    found = store.sequence_neighbours(scope, [c.id for c in top], filt, window)
    fresh = sorted({n for nb in found.values() for n in (nb.previous, nb.next) if n is not None and n not in cands})
    similarity: dict[str, float] = {}
    if fresh:
        found.update(store.sequence_neighbours(scope, fresh, filt, window))
        stored = store.embeddings_of(scope, fresh) if vector is not None and scale is not None else {}
        for fid in fresh:
            v = stored.get(fid)
            if v is not None and vector is not None and scale is not None:
                similarity[fid] = float(np.dot(v, vector))
                own[fid] = scale.of(similarity[fid])
            else:
                own[fid] = 0.0
    for fid, nb in found.items():
        context = before * own.get(nb.previous or "", 0.0) + after * own.get(nb.next or "", 0.0)
        if context <= 0:
            continue
        cand = cands.get(fid)
        if cand is None and (not admit or (threshold is not None and similarity.get(fid, -1.0) < threshold)):
            continue
        if cand is None:
            cand = cands[fid] = Candidate(fid, relevance=own.get(fid, 0.0), matched={"context": 1}, similarity=similarity.get(fid))
        cand.relevance += context
        cand.context = context
