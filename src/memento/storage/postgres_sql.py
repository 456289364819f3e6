"""The statements of the PostgreSQL store's retrieval tiers and the pieces they share.

The retrieval tiers read fragment_terms and fragment_keywords (migration 0002), not the GIN
indexes on fragments, which row-level security keeps the application role from using. Each
ranks from index entries alone, then visits fragments best first (a nested loop that stops at
the LIMIT) so the filter costs a few row look-ups, not one per match. The bench prints their
plans (bench/latency.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..analysis import index_terms
from ..errors import Forbidden
from ..models import DEFAULT_AGENT, AgentScope, Fragment, PoolWrites
from .protocol import SearchFilter
from .sqlfilter import CommonTags, Dialect, live_sql
from .sqlfilter import filter_sql as shared_filter_sql
from .terms import Plan, idf


def scope_sql(scope: AgentScope, alias: str = "f") -> tuple[str, list[Any]]:
    """The visibility predicate (live rows: not soft-deleted, not expired), written out as well as enforced by the RLS policy. The term
    and keyword tables (aliases t, k) carry no session column: their rows are matched to
    fragments, which this predicate then filters."""
    agents = scope.visible_agents()
    live = "TRUE" if alias in ("t", "k") else live_sql(alias, "now()")
    if agents is None:
        return live, []
    sql = f"{live} AND {alias}.agent_id = ANY(%s)"
    if len(agents) == 1 or alias in ("t", "k"):
        return sql, [list(agents)]
    # The pool shares only what is meant for others: another namespace's working memory and
    # private rows stay out of sight (the RLS policy of migration 0012 says the same).
    shared = f"({alias}.session_id IS NULL AND {alias}.privacy_scope <> 'private')"
    return f"{sql} AND ({alias}.agent_id = %s OR {shared})", [list(agents), scope.agent_id]


def write_sql(scope: AgentScope, alias: str = "f") -> str:
    """The rows of the shared pool `scope` may change, as a predicate (MEMENTO_SHARED_POOL)."""
    if scope.is_maintenance or scope.pool_writes is PoolWrites.ALL:
        return "TRUE"
    pool = f"{alias}.agent_id = '{DEFAULT_AGENT}'"
    if scope.pool_writes is PoolWrites.NONE:
        return f"NOT ({pool})"
    return f"NOT ({pool} AND ({alias}.is_anchor OR {alias}.session_id IS NOT NULL))"


def refuse_unwritable(scope: AgentScope, found: Sequence[Fragment]) -> None:
    """Refuse (changing nothing) when `found` holds pool fragments `scope` may not change."""
    refused = [f.id for f in found if not scope.may_change(f)]
    if refused:
        raise Forbidden(scope.pool_refusal(refused))


POSTGRES = Dialect(mark="%s", any_of=True, tables="agent_memory.", timestamp=lambda v: v)


def filter_sql(
    filt: SearchFilter, scope: AgentScope, alias: str = "f", cur: Any = None, common: CommonTags | None = None
) -> tuple[str, list[Any]]:
    """The filter over fragments row `alias`. With `cur` (the statement's, in `scope`'s session)
    and `common` (the database's CommonTags), for a statement that may start from the rows the
    filter keeps (a count, a sort of them, an exact vector ranking): a tag few memories carry
    (fewer than sqlfilter.FEW_TAGGED) is then the array of its memories' seqs from fragment_tags."""
    if cur is None or common is None:
        return shared_filter_sql(filt, alias, POSTGRES, None if scope.is_maintenance else scope.agent_id)

    def few(tags: Sequence[str]) -> bool:  # counted as the session sees them (row-level security)
        return common.few((scope.agent_id, tuple(tags)), lambda at_most: _tagged(cur, tags, at_most))

    return shared_filter_sql(filt, alias, POSTGRES, None if scope.is_maintenance else scope.agent_id, few)


def _tagged(cur: Any, tags: Sequence[str], at_most: int) -> int:
    """The memories the session sees that carry one of `tags`, counted up to `at_most` (an
    index-only scan of fragment_tags). Never a prepared statement: after a common tag, a generic
    plan (a scan of the whole table, good for the average tag) would serve a rare one too."""
    cur.execute(
        "SELECT COUNT(*) AS n FROM (SELECT 1 FROM agent_memory.fragment_tags WHERE tag = ANY(%s::text[]) LIMIT %s) AS s",
        [list(tags), at_most],
        prepare=False,
    )
    row = cur.fetchone()
    return int(row["n"]) if row else 0


def quote_lexeme(term: str) -> str:
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def search_vector(content: str, keywords: Sequence[str], topic: str) -> str:
    """The tsvector literal of a fragment: analyser terms of content and keywords (weight A)
    and of the topic (weight B). Written as a literal so PostgreSQL's locale-dependent parser
    never re-tokenises the shared analyser's output."""
    positions: dict[str, list[str]] = {}
    body = index_terms(content + " " + " ".join(keywords))
    for pos, term in enumerate(body, start=1):
        positions.setdefault(term, []).append(f"{min(pos, 16383)}A")
    for pos, term in enumerate(index_terms(topic), start=len(body) + 1):
        positions.setdefault(term, []).append(f"{min(pos, 16383)}B")
    return " ".join(f"{quote_lexeme(t)}:{','.join(p[:256])}" for t, p in positions.items())


def df_sql(scope: AgentScope, terms: Sequence[str], common: int | None) -> tuple[str, list[Any]]:
    """Each term's document frequency, counted only up to `common` (None: all; an index-only scan that
    stops at the LIMIT), so a term in half the store costs no more than a rare one."""
    where, params = scope_sql(scope, "t")
    return (
        "SELECT q.term, (SELECT COUNT(*) FROM (SELECT 1 FROM agent_memory.fragment_terms t"
        f" WHERE t.term = q.term AND {where} LIMIT %s) AS s) AS n FROM unnest(CAST(%s AS text[])) AS q(term)",
        [*params, common, list(terms)],
    )


def latest_df_sql(scope: AgentScope, terms: Sequence[str], start: int) -> tuple[str, list[Any]]:
    """Each term's document frequency among the fragments from `start` (a seq) on; for terms
    under the common-term threshold (terms.window), whose term rows are few."""
    where, params = scope_sql(scope, "t")
    return (
        "SELECT q.term, (SELECT COUNT(*) FROM agent_memory.fragment_terms t"
        f" WHERE t.term = q.term AND t.seq >= %s AND {where}) AS n FROM unnest(CAST(%s AS text[])) AS q(term)",
        [start, *params, list(terms)],
    )


def text_sql(
    scope: AgentScope, terms: Sequence[str], filt: SearchFilter, limit: int, boost: Sequence[str] = (), newest: int | None = None
) -> tuple[str, list[Any]]:
    """The full-text tier's candidates: fragments holding any of `terms`, best first by
    ts_rank('{0, 0, 0.3, 1}', search, <terms OR-ed>, 1) — for an OR query the sum of the matched
    terms' stored shares (over the number of terms) — plus the shares of the `boost` terms (common
    ones) each candidate holds, probed per candidate so their long posting lists are never read;
    ties newest first. Weights {D, C, B, A}: content and keywords count 1, the topic 0.3 (as bm25
    on SQLite). With `newest`, only the newest `newest` term rows of `terms` are ranked (their
    posting lists exceed the postings budget, terms.plan). Rows: id, rank, content, keywords,
    topic (terms.rescore scores them again)."""
    where, params = scope_sql(scope)
    twhere, tparams = scope_sql(scope, "t")
    fwhere, fparams = filter_sql(filt, scope)
    order = "m.rank DESC, m.seq DESC"
    extra, eparams = "", []
    if boost:  # a candidate's term rows all belong to its (visible) fragment
        extra = (
            " + COALESCE((SELECT SUM(CAST(c.rank AS float8)) FROM agent_memory.fragment_terms c"
            " WHERE c.seq = s.seq AND c.term = ANY(%s)), 0)"
        )
        eparams = [list(boost)]
    n = float(len(terms) + len(boost))
    postings = f"agent_memory.fragment_terms t WHERE t.term = ANY(%s) AND {twhere}"
    nparams: list[Any] = []
    if newest is not None:
        postings = f"(SELECT t.seq, t.rank FROM {postings} ORDER BY t.seq DESC LIMIT %s) AS t"
        nparams = [newest]
    return (
        f"WITH m AS MATERIALIZED (SELECT s.seq, CAST((s.rank{extra}) / %s AS real) AS rank FROM"
        " (SELECT t.seq, SUM(CAST(t.rank AS float8)) AS rank"
        f" FROM {postings} GROUP BY t.seq) AS s)"
        f" SELECT f.id, m.rank, f.content, f.keywords, f.topic FROM (SELECT m.seq, m.rank FROM m ORDER BY {order}) AS m"
        " CROSS JOIN LATERAL (SELECT f.id, f.content, f.keywords, f.topic FROM agent_memory.fragments f"
        f" WHERE f.seq = m.seq AND {where} AND {fwhere}) AS f"
        f" ORDER BY {order} LIMIT %s",
        [*eparams, n, list(terms), *tparams, *nparams, *params, *fparams, limit],
    )


def keyword_sql(scope: AgentScope, chosen: Plan, filt: SearchFilter, limit: int) -> tuple[str, list[Any]]:
    """The keyword tier's statement for `chosen` (terms.plan over keywords): the fragments holding
    a selecting keyword (each keyword's newest `chosen.newest` with a budget), scored by the IDF
    among the scope's `chosen.total` fragments of every keyword of the plan they hold; ties: the
    larger share of the fragment's keywords matched, then importance (fragment_keywords carries
    it), then the id."""
    where, params = scope_sql(scope)
    kwhere, kparams = scope_sql(scope, "k")
    fwhere, fparams = filter_sql(filt, scope)
    scored = [*chosen.search, *chosen.boost]
    weights = [idf(chosen.df[k], chosen.total) for k in scored]
    order = 's.score DESC, s.matched / GREATEST(cardinality(f.keywords), 1) DESC, s.importance DESC, f.id COLLATE "C"'
    return (
        "WITH c AS MATERIALIZED (SELECT DISTINCT n.seq FROM unnest(CAST(%s AS text[])) AS q(keyword) CROSS JOIN LATERAL"
        f" (SELECT k.seq FROM agent_memory.fragment_keywords k WHERE k.keyword = q.keyword AND {kwhere} ORDER BY k.seq DESC LIMIT %s) AS n),"
        " m AS MATERIALIZED (SELECT k.keyword, k.seq, k.importance FROM c JOIN agent_memory.fragment_keywords k ON k.seq = c.seq"
        " WHERE k.keyword = ANY(%s)),"
        " w AS (SELECT * FROM unnest(CAST(%s AS text[]), CAST(%s AS float8[])) AS w(keyword, w)),"
        " s AS (SELECT m.seq, SUM(w.w) AS score, CAST(COUNT(*) AS float8) AS matched, MAX(m.importance) AS importance"
        " FROM m JOIN w ON w.keyword = m.keyword GROUP BY m.seq)"
        " SELECT f.id, s.score FROM s CROSS JOIN LATERAL (SELECT f.id, f.keywords FROM agent_memory.fragments f"
        f" WHERE f.seq = s.seq AND {where} AND {fwhere}) AS f"
        f" ORDER BY {order} LIMIT %s",
        [list(chosen.search), *kparams, chosen.newest, scored, scored, weights, *params, *fparams, limit],
    )


def keyword_df_sql(scope: AgentScope, keywords: Sequence[str], cap: int | None) -> tuple[str, list[Any]]:
    """Each keyword's fragments in the scope, counted only up to `cap` (None: all; an index-only
    scan that stops at the LIMIT), as df_sql counts terms."""
    where, params = scope_sql(scope, "k")
    return (
        "SELECT q.term, (SELECT COUNT(*) FROM (SELECT 1 FROM agent_memory.fragment_keywords k"
        f" WHERE k.keyword = q.term AND {where} LIMIT %s) AS s) AS n FROM unnest(CAST(%s AS text[])) AS q(term)",
        [*params, cap, list(keywords)],
    )
