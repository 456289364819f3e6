"""The retrieval tiers on SQLite: the keyword table, FTS5 full text (the common-term policy of
storage/terms.py, counted within the caller's scope) and the per-agent vector indexes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..models import AgentScope
from . import terms as terms_policy
from .protocol import Hit, SearchFilter
from .sqlfilter import narrowing
from .sqlite_db import SQLiteDatabase
from .sqlite_sql import _filter_sql, _fts_query, _scope_sql
from .vectors import VectorIndex

EXACT_FALLBACK_LIMIT = 20_000


class SQLiteSearch:
    """The three tiers over one database; `agents` caches the agents present (writes that add
    a namespace clear it)."""

    def __init__(
        self, db: SQLiteDatabase, vectors: VectorIndex | None, embedding_model: str | None, agents: terms_policy.CountCache[frozenset[str]]
    ) -> None:
        self.db = db
        self.vectors = vectors
        self.embedding_model = embedding_model
        self.agents = agents
        self.sizes: terms_policy.CountCache[int] = terms_policy.CountCache()

    def keyword_search(self, scope: AgentScope, keywords: Sequence[str], filt: SearchFilter, limit: int) -> list[Hit]:
        if not keywords:
            return []
        where, params = _scope_sql(scope)
        fwhere, fparams = _filter_sql(filt, scope)
        rows = (
            self.db.reader()
            .execute(
                "SELECT f.id, COUNT(*) AS matched FROM fragment_keywords k JOIN fragments f ON f.seq = k.seq"
                f" WHERE k.keyword IN ({','.join('?' * len(keywords))}) AND {where} AND {fwhere}"
                " GROUP BY f.seq ORDER BY matched DESC, f.importance DESC, f.created_at DESC LIMIT ?",
                [*keywords, *params, *fparams, limit],
            )
            .fetchall()
        )
        return [Hit(r[0], float(r[1])) for r in rows]

    def selective_terms(self, scope: AgentScope, terms: Sequence[str]) -> list[str]:
        """The common-term policy (storage/terms.py) with counts taken within `scope`.

        FTS5's vocabulary table counts over every agent; it is exact for a scope that sees every
        agent present (one agent per store, or maintenance) and an upper bound otherwise: a term
        under the bound is rare in the scope too, the others are counted through the index."""
        conn = self.db.reader()
        agents = scope.visible_agents()
        present = self.agents.get("agents", lambda: frozenset(r[0] for r in conn.execute("SELECT DISTINCT agent_id FROM fragments")))
        whole = agents is None or present <= set(agents)

        def vocab(words: Sequence[str]) -> dict[str, int]:
            marks = ",".join("?" * len(words))
            return dict(conn.execute(f"SELECT term, doc FROM fragments_fts_vocab WHERE term IN ({marks})", list(words)).fetchall())

        def scoped(word: str, cap: int | None) -> int:
            where, params = _scope_sql(scope)
            inner = f"SELECT 1 FROM fragments_fts m JOIN fragments f ON f.seq = m.rowid WHERE fragments_fts MATCH ? AND {where}" + (
                " LIMIT ?" if cap is not None else ""
            )
            args = [_fts_query([word]), *params, *([cap] if cap is not None else [])]
            return int(conn.execute(f"SELECT COUNT(*) FROM ({inner})", args).fetchone()[0])

        def capped(words: Sequence[str], common: int) -> dict[str, int]:
            bound = vocab(words)
            if whole:
                return bound
            return {w: (n if n < common else scoped(w, common)) for w, n in bound.items()}

        def exact(words: Sequence[str]) -> dict[str, int]:
            return vocab(words) if whole else {w: scoped(w, None) for w in words}

        return terms_policy.choose(terms, self.scope_size(scope, whole), capped, exact)

    def scope_size(self, scope: AgentScope, whole: bool) -> int:
        """Live fragments visible to `scope` (cached for a few seconds: the policy needs magnitudes)."""
        key = None if whole else scope.visible_agents()

        def count() -> int:
            where, params = _scope_sql(scope, use_index=True) if not whole else _scope_sql(AgentScope("system"))
            return int(self.db.reader().execute(f"SELECT COUNT(*) FROM fragments f WHERE {where}", params).fetchone()[0])

        return self.sizes.get(key, count)

    def text_search(self, scope: AgentScope, terms: Sequence[str], filt: SearchFilter, limit: int) -> list[Hit]:
        terms = self.selective_terms(scope, terms) if terms else []
        if not terms:
            return []
        where, params = _scope_sql(scope)
        fwhere, fparams = _filter_sql(filt, scope)
        rows = (
            self.db.reader()
            .execute(
                # Materialise the full-text matches first: joined directly, the planner may probe
                # the FTS index once per fragment row.
                "WITH m AS MATERIALIZED (SELECT rowid AS seq, bm25(fragments_fts, 1.0, 0.3) AS rank"
                " FROM fragments_fts WHERE fragments_fts MATCH ?)"
                f" SELECT f.id, m.rank FROM m JOIN fragments f ON f.seq = m.seq"
                f" WHERE {where} AND {fwhere} ORDER BY m.rank LIMIT ?",
                [_fts_query(terms), *params, *fparams, limit],
            )
            .fetchall()
        )
        return [Hit(r[0], -float(r[1])) for r in rows]

    def vector_search(self, scope: AgentScope, vector: np.ndarray, filt: SearchFilter, limit: int) -> list[Hit]:
        if self.vectors is None:
            return []
        agents = scope.visible_agents()
        if agents is None:
            agents = tuple(r[0] for r in self.db.reader().execute("SELECT DISTINCT agent_id FROM vector_changes"))
        narrowed = narrowing(filt)
        candidates: list[tuple[int, float]] = []
        for agent in agents:
            candidates.extend(self.vectors.search(agent, vector, limit * (4 if narrowed else 2)))
        candidates.sort(key=lambda c: -c[1])
        hits = self._keep_visible(scope, filt, candidates)[:limit]
        if narrowed and len(hits) < limit:
            hits = self._exact_filtered(scope, filt, vector, limit) or hits
        return hits

    def _keep_visible(self, scope: AgentScope, filt: SearchFilter, candidates: list[tuple[int, float]]) -> list[Hit]:
        if not candidates:
            return []
        where, params = _scope_sql(scope)
        fwhere, fparams = _filter_sql(filt, scope)
        seqs = [c[0] for c in candidates]
        rows = (
            self.db.reader()
            .execute(
                f"SELECT f.seq, f.id FROM fragments f WHERE f.seq IN ({','.join('?' * len(seqs))}) AND {where} AND {fwhere}",
                [*seqs, *params, *fparams],
            )
            .fetchall()
        )
        ids = {r[0]: r[1] for r in rows}
        return [Hit(ids[s], sim) for s, sim in candidates if s in ids]

    def _exact_filtered(self, scope: AgentScope, filt: SearchFilter, vector: np.ndarray, limit: int) -> list[Hit]:
        where, params = _scope_sql(scope)
        fwhere, fparams = _filter_sql(filt, scope)
        rows = (
            self.db.reader()
            .execute(
                "SELECT f.id, e.vector FROM fragment_embeddings e JOIN fragments f ON f.seq = e.seq"
                f" WHERE e.model = ? AND {where} AND {fwhere} LIMIT ?",
                [self.embedding_model, *params, *fparams, EXACT_FALLBACK_LIMIT],
            )
            .fetchall()
        )
        if not rows:
            return []
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        sims = matrix @ vector.astype(np.float32)
        order = np.argsort(-sims)[:limit]
        return [Hit(rows[i][0], float(sims[i])) for i in order]
