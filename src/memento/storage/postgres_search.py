"""The retrieval tiers on PostgreSQL: keyword and full-text look-ups (statements in
postgres_sql.py; the common-term policy of storage/terms.py counted within the caller's scope)
and the pgvector HNSW search."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..models import AgentScope
from . import terms as terms_policy
from .postgres_db import Cursor, PostgresDatabase, planned
from .postgres_sql import POSTGRES, df_sql, filter_sql, keyword_df_sql, keyword_sql, latest_df_sql, scope_sql, text_sql
from .protocol import Hit, SearchFilter
from .sqlfilter import count_index_term, narrowing

MAX_EF_SEARCH = 1000  # pgvector's upper bound for hnsw.ef_search


class PostgresSearch:
    """The three tiers, each one transaction in the caller's row-level security context."""

    def __init__(
        self,
        db: PostgresDatabase,
        embedding_model: str | None,
        ef_search: int,
        scoring: terms_policy.Scoring = terms_policy.DEFAULT_SCORING,
    ) -> None:
        self.db = db
        self.embedding_model = embedding_model
        self.ef_search = ef_search
        # A scope's size counts every live row it sees: after the first, counted in the background.
        self.refresher = terms_policy.Refresher()
        self.sizes: terms_policy.CountCache[int] = terms_policy.CountCache(refresher=self.refresher)
        self.lengths: terms_policy.CountCache[float] = terms_policy.CountCache(terms_policy.AVERAGE_TTL_S)
        self.latest: terms_policy.CountCache[int] = terms_policy.CountCache(terms_policy.AVERAGE_TTL_S)  # terms.window
        # A term in thousands of a scope's memories: its count (and the cap it was counted up to)
        # is kept for minutes, as SQLite keeps FTS5's vocabulary counts (sqlite_search.py). Counting
        # one reads up to a cap of its term rows each time; its count moves little in minutes.
        # Once stale, a kept count still serves while the refresher counts it again.
        self.frequent = terms_policy.FrequentCounts(self.refresher)
        self.scoring = scoring

    def keyword_search(self, scope: AgentScope, keywords: Sequence[str], filt: SearchFilter, limit: int) -> list[Hit]:
        """Fragments holding any of `keywords`, scored by the matched keywords' IDF (keyword_sql)."""
        if not keywords:
            return []
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            total = self.scope_size(cur, scope)
            chosen = terms_policy.plan(
                keywords, total, lambda words, cap: self._keyword_counts(cur, scope, words, cap, total), self.scoring
            )
            if not chosen.search:
                return []
            cur.execute(*keyword_sql(scope, chosen, filt, limit))
            return [Hit(r["id"], float(r["score"])) for r in cur.fetchall()]

    def _keyword_counts(self, cur: Cursor, scope: AgentScope, words: Sequence[str], cap: int | None, total: int) -> dict[str, int]:
        """Each keyword's fragments in `scope` up to `cap` (terms.plan's `capped_df`); a count past
        the postings budget is kept and counted again in the background (only counts above zero:
        a keyword a new memory brings is found at once)."""

        def counted(c: Cursor, asked: Sequence[str], upto: int | None) -> dict[str, int]:
            c.execute(*keyword_df_sql(scope, asked, upto))
            return {r["term"]: int(r["n"]) for r in c.fetchall() if int(r["n"]) > 0}

        def apart(asked: Sequence[str], upto: int | None) -> dict[str, int]:  # on the refresher's thread
            with self.db.tx(scope.agent_id, scope.pool_writes, read_only=True) as c:
                return counted(c, asked, upto)

        keep = lambda n: total >= terms_policy.COMMON_TERM_MIN_DOCS and n >= self.scoring.postings  # noqa: E731
        return self.frequent.count(("keywords", scope.visible_agents()), words, cap, lambda w, c: counted(cur, w, c), apart, keep)

    def plan(self, cur: Cursor, scope: AgentScope, terms: Sequence[str]) -> terms_policy.Plan:
        """The common-term policy (storage/terms.py) with counts taken within `scope`."""

        key, total = scope.visible_agents(), self.scope_size(cur, scope)
        common = terms_policy.common_df(total)  # a term at least this frequent only scores (terms.plan)

        def counted(c: Cursor, words: Sequence[str], cap: int | None) -> dict[str, int]:
            c.execute(*df_sql(scope, words, cap))
            return {r["term"]: int(r["n"]) for r in c.fetchall()}

        def apart(words: Sequence[str], cap: int | None) -> dict[str, int]:  # on the refresher's thread
            with self.db.tx(scope.agent_id, scope.pool_writes, read_only=True) as c:
                return counted(c, words, cap)

        def capped(words: Sequence[str], cap: int) -> dict[str, int]:
            keep = lambda n: total >= terms_policy.COMMON_TERM_MIN_DOCS and n >= common  # noqa: E731 (a rare count stays exact)
            return self.frequent.count(key, words, cap, lambda w, c: counted(cur, w, c), apart, keep)

        return terms_policy.plan(terms, total, capped, self.scoring)

    def selective_terms(self, cur: Cursor, scope: AgentScope, terms: list[str]) -> list[str]:
        """The terms that select full-text candidates in `scope` (the others only score them)."""
        return self.plan(cur, scope, terms).search

    def _latest_counts(self, cur: Cursor, scope: AgentScope, words: Sequence[str]) -> dict[str, int]:
        """Each word's documents among the scope's latest `idf_window` memories (terms.window;
        only words under the common-term threshold are asked, so their term rows are few; kept
        AVERAGE_TTL_S)."""
        size, key = self.scoring.idf_window, scope.visible_agents()
        where, params = scope_sql(scope)

        def first() -> int:
            cur.execute(
                f"SELECT f.seq FROM agent_memory.fragments f WHERE {where} ORDER BY f.seq DESC OFFSET %s LIMIT 1", [*params, size - 1]
            )
            row = cur.fetchone()
            return int(row["seq"]) if row else 0

        start = self.latest.get(("first", key), first)
        out = {w: n for w in words if (n := self.latest.fresh((key, start, w))) is not None}
        asked = [w for w in words if w not in out]
        if asked:
            cur.execute(*latest_df_sql(scope, asked, start))
            counted = {r["term"]: int(r["n"]) for r in cur.fetchall()}
            for w in asked:
                out[w] = counted.get(w, 0)
                self.latest.put((key, start, w), out[w], keep=terms_policy.FREQUENT_KEEP)
        return out

    def scope_size(self, cur: Cursor, scope: AgentScope) -> int:
        """Live fragments visible to `scope` (kept for a few seconds, then counted again in the
        background: the policy needs magnitudes, and counting reads every row the scope sees)."""

        def count(c: Cursor) -> int:
            where, params = scope_sql(scope)
            # An index-only scan of the live rows' index (migration 0031): at a million memories
            # ~125 ms instead of a parallel scan of the table (~480 ms, three processes).
            live = count_index_term(SearchFilter(), "f", POSTGRES)
            c.execute(f"SELECT COUNT(*) AS n FROM agent_memory.fragments f WHERE {where}{live}", params)
            row = c.fetchone()
            return int(row["n"]) if row else 0

        def apart() -> int:  # on the refresher's thread: a read-only transaction of its own
            with self.db.tx(scope.agent_id, scope.pool_writes, read_only=True) as c:
                return count(c)

        return self.sizes.get(scope.visible_agents(), lambda: count(cur), later=apart)

    def average_length(self, cur: Cursor, scope: AgentScope) -> float:
        """The mean content length (characters) of the scope's latest AVERAGE_SAMPLE fragments."""

        def average() -> float:
            where, params = scope_sql(scope)
            cur.execute(
                "SELECT AVG(n) AS n FROM (SELECT length(f.content) AS n FROM agent_memory.fragments f"
                f" WHERE {where} ORDER BY f.seq DESC LIMIT %s) AS s",
                [*params, terms_policy.AVERAGE_SAMPLE],
            )
            row = cur.fetchone()
            return float(row["n"] or 0.0) if row else 0.0

        return self.lengths.get(scope.visible_agents(), average)

    def weighed(self, cur: Cursor, scope: AgentScope, terms: Sequence[str]) -> tuple[terms_policy.Plan, terms_policy.Plan] | None:
        """The terms' plan over the scope and the same weighed by its latest memories
        (terms.window), or None when no term selects; once a recall (terms.shared_plans)."""

        def compute() -> tuple[terms_policy.Plan, terms_policy.Plan] | None:
            planned = self.plan(cur, scope, terms)
            if not planned.search:
                return None
            return planned, terms_policy.window(planned, self.scoring.idf_window, lambda words: self._latest_counts(cur, scope, words))

        return terms_policy.shared_plan((id(self), scope.visible_agents(), tuple(terms)), compute)

    def text_search(self, scope: AgentScope, terms: Sequence[str], filt: SearchFilter, limit: int) -> list[Hit]:
        """The rare terms' best matches (see text_sql), scored again with every term (terms.rescore)."""
        if not terms:
            return []
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            weighed = self.weighed(cur, scope, terms)
            if weighed is None:
                return []
            _, chosen = weighed
            cur.execute(*text_sql(scope, chosen.search, filt, max(limit, self.scoring.pool), chosen.boost, chosen.newest))
            docs = [(r["id"], r["content"], " ".join(r["keywords"] or []), r["topic"]) for r in cur.fetchall()]
            average = self.average_length(cur, scope)
        ranked = terms_policy.rescore(chosen, docs, average, self.scoring)
        return [Hit(doc_id, score) for doc_id, score in ranked[:limit]]

    def text_scores(self, scope: AgentScope, terms: Sequence[str], ids: Sequence[str]) -> dict[str, float]:
        """text_search's scores of these visible fragments, with the terms weighed as it weighs
        them (those holding none of the terms left out)."""
        if not terms or not ids:
            return {}
        where, params = scope_sql(scope)
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            weighed = self.weighed(cur, scope, terms)
            if weighed is None:
                return {}
            _, chosen = weighed
            cur.execute(
                f"SELECT f.id, f.content, f.keywords, f.topic FROM agent_memory.fragments f WHERE f.id = ANY(%s) AND {where}",
                [list(dict.fromkeys(ids)), *params],
            )
            docs = [(r["id"], r["content"], " ".join(r["keywords"] or []), r["topic"]) for r in cur.fetchall()]
            average = self.average_length(cur, scope)
        return {doc_id: score for doc_id, score in terms_policy.rescore(chosen, docs, average, self.scoring) if score > 0}

    def vector_search(self, scope: AgentScope, vector: np.ndarray, filt: SearchFilter, limit: int) -> list[Hit]:
        if self.embedding_model is None:
            return []
        where, params = scope_sql(scope)
        query = np.ascontiguousarray(vector, dtype=np.float32)
        with self.db.tx(scope.agent_id, scope.pool_writes) as cur:
            fwhere, fparams = filter_sql(filt, scope, cur=cur, common=self.db.common_tags)
            # Iterative scans (pgvector 0.8) keep walking the HNSW graph until enough rows pass
            # the filters; relaxed order is re-sorted below.
            # For an unfiltered search the planner prices the HNSW scan of a small store (~10k
            # rows) above an exact scan + sort, underpricing the distances on out-of-line
            # (TOASTed) vectors: 30 ms instead of 2 at 10k. Sorting is then ruled out, so the
            # ordered HNSW scan wins (ef_search >= the store size keeps small stores exact).
            # With a topic/type/session filter the planner keeps its choice: an exact scan of
            # the few matching rows beats walking the graph for them.
            broad = not narrowing(filt)
            cur.execute(
                "SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', 'relaxed_order', true)",
                (str(self.ef_search),),
            )
            with planned(cur, enable_sort="off" if broad else "on"):  # not for what a read session asks next
                cur.execute(
                    "SELECT f.id, 1 - (f.embedding <=> %s) AS sim FROM agent_memory.fragments f"
                    f" WHERE f.embedding IS NOT NULL AND f.embedding_model = %s AND {where} AND {fwhere}"
                    " ORDER BY f.embedding <=> %s LIMIT %s",
                    [query, self.embedding_model, *params, *fparams, query, limit],
                )
                hits = [Hit(r["id"], float(r["sim"])) for r in cur.fetchall()]
        hits.sort(key=lambda h: -h.score)
        return hits
