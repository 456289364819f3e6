"""Two reads of the memory beyond recall: the session-start context (000 §6.7: core memory and
the session's working memory within a token budget) and the causal graph walk of graph_explore."""

from __future__ import annotations

from datetime import datetime

from ..errors import NotFound
from ..models import AgentScope, ContextInput, Fragment, GraphExploreInput, RelationType
from ..results import ContextResult, Edge, FragmentView, GraphResult, views
from ..storage.protocol import SearchFilter, Store

CAUSAL_RELATIONS = (RelationType.CAUSED_BY, RelationType.RESOLVED_BY)


def load_context(store: Store, scope: AgentScope, inp: ContextInput, session: str | None, now: datetime) -> ContextResult:
    """Core memory (important fragments of the given types) plus the session's working memory;
    working memory gets up to half the budget when there is any."""
    working = store.list_fragments(scope, SearchFilter(session_id=session, only_session=True), 200) if session else []
    working_budget = inp.tokenBudget // 2 if working else 0
    work_items, work_used = take(working, working_budget)
    core_items, core_used = take(store.list_fragments(scope, SearchFilter(types=tuple(inp.types)), 500), inp.tokenBudget - work_used)
    store.record_access([f.id for f in core_items + work_items], now)
    lines = ["## Core memory"] + [f"- [{f.type.value}] {f.content} (id {f.id})" for f in core_items]
    if session:
        lines += ["", "## Working memory (this session)"] + [f"- [{f.type.value}] {f.content}" for f in work_items]
    return ContextResult(
        core_memory=views(core_items),
        working_memory=views(work_items),
        total_tokens=core_used + work_used,
        token_budget=inp.tokenBudget,
        rendered="\n".join(lines),
    )


def take(fragments: list[Fragment], budget: int) -> tuple[list[Fragment], int]:
    """The leading fragments whose estimated tokens fit in `budget`, and the tokens they use."""
    taken, used = [], 0
    for fragment in fragments:
        if used + fragment.estimated_tokens > budget:
            break
        taken.append(fragment)
        used += fragment.estimated_tokens
    return taken, used


def explore(store: Store, scope: AgentScope, inp: GraphExploreInput) -> GraphResult:
    """Follow caused_by / resolved_by edges (both directions) from a fragment, `inp.depth` hops."""
    start = store.get_many(scope, [inp.startId])
    if not start:
        raise NotFound(f"fragment {inp.startId!r} not found")
    nodes = {start[0].id: start[0]}
    edges: dict[tuple[str, str], RelationType] = {}
    frontier = [start[0].id]
    for _ in range(inp.depth):
        found = store.neighbours(scope, frontier, CAUSAL_RELATIONS, 200)
        frontier = []
        for link, fragment in found:
            edges[(link.from_id, link.to_id)] = link.relation_type
            if fragment.id not in nodes:
                nodes[fragment.id] = fragment
                frontier.append(fragment.id)
        if not frontier:
            break
    return GraphResult(
        start=FragmentView.of(start[0]),
        nodes=views([f for fid, f in nodes.items() if fid != start[0].id]),
        edges=[Edge(from_=a, to=b, relation=r) for (a, b), r in edges.items()],
    )
