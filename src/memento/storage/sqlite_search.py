"""The retrieval tiers on SQLite: the keyword table, FTS5 full text (the common-term policy of
storage/terms.py, counted within the caller's scope) and the per-agent vector indexes."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from ..models import AgentScope
from . import terms as terms_policy
from .protocol import Hit, SearchFilter
from .sqlfilter import count_index_term, narrowing
from .sqlite_db import SQLiteDatabase
from .sqlite_sql import SQLITE, _count, _filter_sql, _fts_query, _scope_sql
from .vectors import VectorIndex

EXACT_FALLBACK_LIMIT = 20_000
NARROWED_REACH = 4_000  # neighbours a filtered vector search looks through before it reads the filter's rows
# A narrowing filter's rows up to which reading each one's vector (~2.5 us a row at a million
# memories) costs less than the graph's wider look (~20 ms: the search and the visibility of
# NARROWED_REACH rows), which then often finds too few anyway (a four-day range: 11 of 4,000).
EXACT_FIRST = 8_000


RANKED_FIRST = 3  # full-text matches read per wanted one before falling back to reading all (_matches)


class SQLiteSearch:
    """The three tiers over one database; `agents` caches the agents present (writes that add
    a namespace clear it)."""

    def __init__(
        self,
        db: SQLiteDatabase,
        vectors: VectorIndex | None,
        embedding_model: str | None,
        agents: terms_policy.CountCache[frozenset[str]],
        scoring: terms_policy.Scoring = terms_policy.DEFAULT_SCORING,
    ) -> None:
        self.db = db
        self.vectors = vectors
        self.embedding_model = embedding_model
        self.agents = agents
        # A scope's size counts every live row it sees: after the first, counted in the background.
        self.refresher = terms_policy.Refresher()
        self.sizes: terms_policy.CountCache[int] = terms_policy.CountCache(refresher=self.refresher)
        self.lengths: terms_policy.CountCache[float] = terms_policy.CountCache(terms_policy.AVERAGE_TTL_S)
        self.latest: terms_policy.CountCache[int] = terms_policy.CountCache(terms_policy.AVERAGE_TTL_S)  # terms.window
        # FTS5's vocabulary counts a term's documents by reading its whole posting list: a term
        # in a third of a million memories costs milliseconds each time, so frequent ones are kept
        # (store-wide under the key "store", a scope's own under ("scope", its agents), keyword counts
        # under ("keywords", its agents)) and, once stale, counted again by the refresher.
        self.frequent = terms_policy.FrequentCounts(self.refresher)
        self.scoring = scoring

    def keyword_search(self, scope: AgentScope, keywords: Sequence[str], filt: SearchFilter, limit: int) -> list[Hit]:
        """Fragments holding any of `keywords`, scored by the matched keywords' IDF within the scope
        (a rare keyword outweighs several common ones); ties: the larger share of the fragment's
        keywords matched, then importance, then the id (recall's L1 path orders the same way).

        In a scope of COMMON_TERM_MIN_DOCS memories or more the full-text tier's policy applies
        (storage/terms.py `plan`): the rarer keywords select the candidates while their matches
        stay within the postings budget, the common ones only score them, and a keyword matching
        more than the budget alone brings in its newest matches. Without it a keyword held by a
        third of a million memories had every one of them joined and ranked (1.6 s at a million)."""
        if not keywords:
            return []
        keywords = list(dict.fromkeys(keywords))
        whole = self._whole(scope)
        total = self.scope_size(scope, whole)
        chosen = terms_policy.plan(keywords, total, lambda words, cap: self._keyword_counts(scope, words, cap, total), self.scoring)
        if not chosen.search:
            return []
        scored = [*chosen.search, *chosen.boost]
        weights = [v for k in scored for v in (k, terms_policy.idf(chosen.df[k], total))]
        where, params = _scope_sql(scope)
        fwhere, fparams = _filter_sql(filt, scope)
        newest = -1 if chosen.newest is None else chosen.newest
        # Each selecting keyword's matches (its newest `newest` with a budget: a walk of the
        # (keyword, seq) key backwards that stops), then every scoring keyword those rows hold.
        selecting = " UNION ".join(
            "SELECT * FROM (SELECT k.seq FROM fragment_keywords k JOIN fragments f ON f.seq = k.seq"
            f" WHERE k.keyword = ? AND {where} ORDER BY k.seq DESC LIMIT ?)"
            for _ in chosen.search
        )
        marks = ",".join("?" * len(scored))
        rows = (
            self.db.reader()
            .execute(
                f"WITH c AS MATERIALIZED ({selecting}),"
                f" m AS MATERIALIZED (SELECT k.keyword, k.seq FROM c JOIN fragment_keywords k ON k.seq = c.seq WHERE k.keyword IN ({marks})),"
                f" w(keyword, w) AS (VALUES {','.join('(?, ?)' for _ in scored)})"
                " SELECT f.id, SUM(w.w) AS score FROM m JOIN w ON w.keyword = m.keyword JOIN fragments f ON f.seq = m.seq"
                f" WHERE {where} AND {fwhere} GROUP BY m.seq"
                " ORDER BY score DESC, COUNT(*) * 1.0 / max(json_array_length(f.keywords), 1) DESC, f.importance DESC, f.id LIMIT ?",
                [*[v for k in chosen.search for v in (k, *params, newest)], *scored, *weights, *params, *fparams, limit],
            )
            .fetchall()
        )
        return [Hit(r[0], float(r[1])) for r in rows]

    def _keyword_counts(self, scope: AgentScope, words: Sequence[str], cap: int | None, total: int) -> dict[str, int]:
        """Each keyword's memories in `scope`, counted up to `cap` (terms.plan's `capped_df`);
        a frequent keyword's count is kept and counted again in the background like a term's."""

        whole = self._whole(scope)

        def count(asked: Sequence[str], upto: int | None) -> dict[str, int]:  # on whichever thread runs it
            params: list[object] = []
            if whole:  # the keyword's own entries, as FTS5's vocabulary counts a term's (removed with their memory)
                inner = "SELECT 1 FROM fragment_keywords k WHERE k.keyword = ? LIMIT ?"
            else:
                where, params = _scope_sql(scope)
                inner = f"SELECT 1 FROM fragment_keywords k JOIN fragments f ON f.seq = k.seq WHERE k.keyword = ? AND {where} LIMIT ?"
            conn = self.db.reader()
            found = {
                w: int(conn.execute(f"SELECT COUNT(*) FROM ({inner})", [w, *params, -1 if upto is None else upto]).fetchone()[0])
                for w in asked
            }
            return {w: n for w, n in found.items() if n > 0}

        # Counting reads a keyword's entries: a count past the postings budget is worth keeping
        # (only counts above zero are kept, so a keyword a new memory brings is found at once).
        keep = lambda n: total >= terms_policy.COMMON_TERM_MIN_DOCS and n >= self.scoring.postings  # noqa: E731
        return self.frequent.count(("keywords", scope.visible_agents()), words, cap, count, count, keep)

    def _whole(self, scope: AgentScope) -> bool:
        """Whether `scope` sees every agent present (store-wide counts are then its own)."""
        conn = self.db.reader()
        agents = scope.visible_agents()
        present = self.agents.get("agents", lambda: frozenset(r[0] for r in conn.execute("SELECT DISTINCT agent_id FROM fragments")))
        return agents is None or present <= set(agents)

    def plan(self, scope: AgentScope, terms: Sequence[str]) -> terms_policy.Plan:
        """The common-term policy (storage/terms.py) with counts taken within `scope`.

        FTS5's vocabulary table counts over every agent; it is exact for a scope that sees every
        agent present (one agent per store, or maintenance). For another scope it only tells
        which terms the store holds; those are counted through the index, within the scope, up
        to the cap (a rare term's count is short by definition)."""
        whole = self._whole(scope)
        total = self.scope_size(scope, whole)
        common = terms_policy.common_df(total)

        def vocab(words: Sequence[str], cap: int | None = None) -> dict[str, int]:  # on whichever thread runs it
            marks = ",".join("?" * len(words))
            return dict(self.db.reader().execute(f"SELECT term, doc FROM fragments_fts_vocab WHERE term IN ({marks})", words).fetchall())

        def scoped(words: Sequence[str], cap: int | None) -> dict[str, int]:
            where, params = _scope_sql(scope)
            inner = f"SELECT 1 FROM fragments_fts m JOIN fragments f ON f.seq = m.rowid WHERE fragments_fts MATCH ? AND {where} LIMIT ?"
            conn = self.db.reader()
            limit = -1 if cap is None else cap
            return {w: int(conn.execute(f"SELECT COUNT(*) FROM ({inner})", [_fts_query([w]), *params, limit]).fetchone()[0]) for w in words}

        def capped(words: Sequence[str], cap: int) -> dict[str, int]:
            bound = self.frequent.count("store", words, None, vocab, vocab, lambda n: n >= terms_policy.COMMON_TERM_MIN_DOCS)
            if whole:
                return bound
            # The store-wide count bounds the scope's; the scope's own weighs the term (IDF).
            present = [w for w in words if bound.get(w, 0) > 0]
            keep = lambda n: total >= terms_policy.COMMON_TERM_MIN_DOCS and n >= common  # noqa: E731 (a rare count stays exact)
            return self.frequent.count(("scope", scope.visible_agents()), present, cap, scoped, scoped, keep) if present else {}

        return terms_policy.plan(terms, total, capped, self.scoring)

    def selective_terms(self, scope: AgentScope, terms: Sequence[str]) -> list[str]:
        """The terms that select full-text candidates in `scope` (the others only score them)."""
        return self.plan(scope, terms).search

    def _latest_counts(self, scope: AgentScope, words: Sequence[str]) -> dict[str, int]:
        """Each word's documents among the scope's latest `idf_window` memories (terms.window),
        through the full-text index from the window's first row on (kept AVERAGE_TTL_S)."""
        size, key = self.scoring.idf_window, scope.visible_agents()
        where, params = _scope_sql(scope)
        conn = self.db.reader()

        def first() -> int:
            row = conn.execute(
                f"SELECT f.seq FROM fragments f WHERE {where} ORDER BY f.seq DESC LIMIT 1 OFFSET ?", [*params, size - 1]
            ).fetchone()
            return int(row[0]) if row else 0

        start = self.latest.get(("first", key), first)
        whole = self._whole(scope)
        out: dict[str, int] = {}
        for word in words:
            known = self.latest.fresh((key, start, word))
            if known is None:
                match = [_fts_query([word]), start]
                if whole:
                    sql, args = "SELECT COUNT(*) FROM fragments_fts WHERE fragments_fts MATCH ? AND rowid >= ?", match
                else:
                    sql = (
                        "SELECT COUNT(*) FROM fragments_fts m JOIN fragments f ON f.seq = m.rowid"
                        f" WHERE fragments_fts MATCH ? AND m.rowid >= ? AND {where}"
                    )
                    args = [*match, *params]
                known = int(conn.execute(sql, args).fetchone()[0])
                self.latest.put((key, start, word), known, keep=terms_policy.FREQUENT_KEEP)
            out[word] = known
        return out

    def scope_size(self, scope: AgentScope, whole: bool) -> int:
        """Live fragments visible to `scope` (cached for a few seconds: the policy needs magnitudes)."""
        key = None if whole else scope.visible_agents()

        def count() -> int:
            where, params = _scope_sql(scope, use_index=True) if not whole else _scope_sql(AgentScope("system"))
            # From the index of live rows alone (migration 0031): at a million memories ~45 ms
            # warm instead of ~180 (0.7 s instead of 4.4 cold), every COUNT_TTL_S while recalls run.
            live = count_index_term(SearchFilter(), "f", SQLITE)
            return int(self.db.reader().execute(f"SELECT COUNT(*) FROM fragments f WHERE {where}{live}", params).fetchone()[0])

        return self.sizes.get(key, count, later=count)  # `count` reads on whichever thread runs it

    def average_length(self, scope: AgentScope) -> float:
        """The mean content length (characters) of the scope's latest AVERAGE_SAMPLE fragments."""

        def average() -> float:
            where, params = _scope_sql(scope)
            row = (
                self.db.reader()
                .execute(
                    f"SELECT AVG(n) FROM (SELECT length(f.content) AS n FROM fragments f WHERE {where} ORDER BY f.seq DESC LIMIT ?)",
                    [*params, terms_policy.AVERAGE_SAMPLE],
                )
                .fetchone()
            )
            return float(row[0] or 0.0)

        return self.lengths.get(scope.visible_agents(), average)

    def weighed(self, scope: AgentScope, terms: Sequence[str]) -> tuple[terms_policy.Plan, terms_policy.Plan] | None:
        """The terms' plan over the scope and the same weighed by its latest memories
        (terms.window), or None when no term selects; once a recall (terms.shared_plans)."""

        def compute() -> tuple[terms_policy.Plan, terms_policy.Plan] | None:
            planned = self.plan(scope, terms)
            if not planned.search:
                return None
            return planned, terms_policy.window(planned, self.scoring.idf_window, lambda words: self._latest_counts(scope, words))

        return terms_policy.shared_plan((id(self), scope.visible_agents(), tuple(terms)), compute)

    def text_search(self, scope: AgentScope, terms: Sequence[str], filt: SearchFilter, limit: int) -> list[Hit]:
        """The rare terms' best matches by FTS5's bm25 (those holding a common term as well first),
        scored again with every term (terms.rescore)."""
        if not terms:
            return []
        weighed = self.weighed(scope, terms)
        if weighed is None:
            return []
        planned, chosen = weighed
        pool, newest = max(limit, self.scoring.pool), chosen.newest
        search = _fts_query(chosen.search)
        if chosen.boost and sum(planned.df.get(t, 0) for t in chosen.search) >= pool:
            # More matches than the pool: those holding a common term as well come first. With
            # fewer, every match is in already (the combined query would only find a subset).
            rows = self._matches_boosted(scope, filt, search, f"({search}) AND ({_fts_query(chosen.boost)})", pool, newest)
        else:
            rows = self._matches(scope, filt, search, pool, newest)
        docs: dict[str, tuple[str, str, str, str]] = {}
        for doc_id, content, keywords, topic in rows:
            docs.setdefault(doc_id, (doc_id, content, " ".join(json.loads(keywords)), topic))
        ranked = terms_policy.rescore(chosen, list(docs.values()), self.average_length(scope), self.scoring)
        return [Hit(doc_id, score) for doc_id, score in ranked[:limit]]

    def text_scores(self, scope: AgentScope, terms: Sequence[str], ids: Sequence[str]) -> dict[str, float]:
        """text_search's scores of these visible fragments, with the terms weighed as it weighs
        them (those holding none of the terms left out): the score a fragment that another tier
        found would have had had it been in the full-text tier's pool."""
        if not terms or not ids:
            return {}
        weighed = self.weighed(scope, terms)
        if weighed is None:
            return {}
        _, chosen = weighed
        where, params = _scope_sql(scope)
        wanted = list(dict.fromkeys(ids))
        rows = (
            self.db.reader()
            .execute(
                f"SELECT f.id, f.content, f.keywords, f.topic FROM fragments f WHERE f.id IN ({','.join('?' * len(wanted))}) AND {where}",
                [*wanted, *params],
            )
            .fetchall()
        )
        docs = [(doc_id, content, " ".join(json.loads(keywords)), topic) for doc_id, content, keywords, topic in rows]
        return {
            doc_id: score for doc_id, score in terms_policy.rescore(chosen, docs, self.average_length(scope), self.scoring) if score > 0
        }

    def _matches(
        self, scope: AgentScope, filt: SearchFilter, match: str, limit: int, newest: int | None = None
    ) -> list[tuple[str, str, str, str]]:
        """(id, content, keywords, topic) of the best `limit` matches of `match`, by bm25; with
        `newest`, among the newest `newest` matches only (FTS5 walks its posting lists by rowid
        and stops there, so a term in half the store costs no more than a rare one).

        The matches are ranked before they are joined with their rows: only the best
        RANKED_FIRST × `limit` are read and filtered (at 1M, ~700 matches: 1.5 ms instead of 3.9).
        When the scope and filter leave fewer than `limit` of those and there were more matches,
        every match is read, as it would have been."""
        where, params = _scope_sql(scope)
        fwhere, fparams = _filter_sql(filt, scope)
        bound, extra = (" ORDER BY rowid DESC LIMIT ?", [newest]) if newest is not None else ("", [])
        # Materialise the full-text matches first: joined directly, the planner may probe the
        # FTS index once per fragment row.
        matches = f"m AS MATERIALIZED (SELECT rowid AS seq, bm25(fragments_fts, 1.0, 0.3) AS rank FROM fragments_fts WHERE fragments_fts MATCH ?{bound})"
        reader = self.db.reader()
        first = RANKED_FIRST * limit
        rows = reader.execute(
            f"WITH {matches}, top AS MATERIALIZED (SELECT seq, rank, COUNT(*) OVER () AS n FROM m ORDER BY rank LIMIT ?)"
            f" SELECT f.id, f.content, f.keywords, f.topic, top.n FROM top JOIN fragments f ON f.seq = top.seq"
            f" WHERE {where} AND {fwhere} ORDER BY top.rank LIMIT ?",
            [match, *extra, first, *params, *fparams, limit],
        ).fetchall()
        if len(rows) >= limit or (rows and rows[0][4] <= first):
            return [tuple(r[:4]) for r in rows]
        return [
            tuple(r)
            for r in reader.execute(
                f"WITH {matches} SELECT f.id, f.content, f.keywords, f.topic FROM m JOIN fragments f ON f.seq = m.seq"
                f" WHERE {where} AND {fwhere} ORDER BY m.rank LIMIT ?",
                [match, *extra, *params, *fparams, limit],
            )
        ]

    def _matches_boosted(
        self, scope: AgentScope, filt: SearchFilter, match: str, both: str, limit: int, newest: int | None
    ) -> list[tuple[str, str, str, str]]:
        """The best `limit` matches of `both` (the selecting terms and a common one), then those of
        `match` (the selecting terms), each list as _matches reads it, from one statement. Both
        are ordered by `match`'s bm25 (a match of `both` that the bound `newest` left out of
        `match`'s own comes after those in it, newest first). Ranked by bm25 over `both` instead,
        FTS5 would first count the documents of every common term, walking each one's whole
        posting list (at a million memories 2.7 ms against 0.9); the rescoring (terms.rescore)
        weighs every term anyway."""
        where, params = _scope_sql(scope)
        fwhere, fparams = _filter_sql(filt, scope)
        bound, extra = (" ORDER BY rowid DESC LIMIT ?", [newest]) if newest is not None else ("", [])
        ranked = (
            f"m AS MATERIALIZED (SELECT rowid AS seq, bm25(fragments_fts, 1.0, 0.3) AS rank FROM fragments_fts WHERE fragments_fts MATCH ?{bound}),"
            f" b AS MATERIALIZED (SELECT rowid AS seq FROM fragments_fts WHERE fragments_fts MATCH ?{bound}),"
            " bm AS MATERIALIZED (SELECT b.seq, coalesce(m.rank, 1e300) AS rank FROM b LEFT JOIN m ON m.seq = b.seq)"
        )
        args = [match, *extra, both, *extra]
        first = RANKED_FIRST * limit

        def best(part: int, source: str, head: int | None) -> str:
            """The part's rows that pass the scope and filter, best first: of its first `head`, or of all."""
            rows = f"(SELECT seq, rank FROM {source} ORDER BY rank, seq DESC LIMIT {head})" if head else source
            return (
                f"SELECT * FROM (SELECT {part}, f.id, f.content, f.keywords, f.topic FROM {rows} AS top JOIN fragments f ON f.seq = top.seq"
                f" WHERE {where} AND {fwhere} ORDER BY top.rank, top.seq DESC LIMIT {int(limit)})"
            )

        reader = self.db.reader()
        found = reader.execute(
            f"WITH {ranked} {best(1, 'bm', first)} UNION ALL {best(0, 'm', first)}"
            " UNION ALL SELECT 2, (SELECT COUNT(*) FROM bm), (SELECT COUNT(*) FROM m), NULL, NULL",
            [*args, *params, *fparams, *params, *fparams],
        ).fetchall()
        counts = next(r for r in found if r[0] == 2)
        out: dict[int, list[tuple[str, str, str, str]]] = {}
        for part, source, total in ((1, "bm", counts[1]), (0, "m", counts[2])):
            rows = [tuple(r[1:]) for r in found if r[0] == part]
            if len(rows) < limit and total > first:  # the scope or filter left too few of the first: read every match
                rows = [tuple(r[1:]) for r in reader.execute(f"WITH {ranked} {best(part, source, None)}", [*args, *params, *fparams])]
            out[part] = rows
        return out[1] + out[0]

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
        if narrowed and len(hits) < limit and len(candidates) >= limit * 4:
            # A filter that keeps a few percent of the rows (a topic among fifty): the graph's
            # wider neighbourhood usually holds enough of them (~20 ms at a million memories),
            # where reading every matching row's vector costs ~2.5 us each (~50 ms for 20,000).
            # When the first look's share says the wider one would find too few, a filter of few
            # rows (a time range, a small topic) is ranked exactly at once: the wider look would
            # cost more and then not be enough. (Counting up to EXACT_FIRST rows costs 3-10 ms at
            # a million memories, so a filter the first look already meets is not counted.)
            expected = len(hits) * NARROWED_REACH / (limit * 4)
            if expected < limit and _count(self.db, scope, filt, EXACT_FIRST + 1) <= EXACT_FIRST:
                return self._exact_filtered(scope, filt, vector, limit) or hits
            wider = sorted((c for agent in agents for c in self.vectors.search(agent, vector, NARROWED_REACH)), key=lambda c: -c[1])
            hits = self._keep_visible(scope, filt, wider)[:limit]
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
        """The filter's rows (at most EXACT_FALLBACK_LIMIT) ranked by their stored vectors: found
        through the fragments' own indexes (agent and topic, type, creation time), each vector
        then read by its row. Joined the other way the planner read every stored vector in the
        store to find them (1.4 s for a topic at a million memories, 0.1 s this way)."""
        where, params = _scope_sql(scope, use_index=True)
        fwhere, fparams = _filter_sql(filt, scope, db=self.db)
        rows = (
            self.db.reader()
            .execute(
                "SELECT f.id, e.vector FROM fragments f CROSS JOIN fragment_embeddings e ON e.seq = f.seq"
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
