"""Two reads of the memory beyond recall: the session-start context (000 §6.7: core memory and
the session's working memory within a token budget) and the causal graph walk of graph_explore."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ..errors import NotFound
from ..models import AgentScope, ContextInput, Fragment, GraphExploreInput, RelationType
from ..results import ContextResult, Edge, FragmentView, GraphResult, NodeLinkage, ReviewView, preview, views
from ..storage.protocol import Linkage, LinkageStore, ReviewCard, SearchFilter, Store
from .budget import Counter, WireBudget

CAUSAL_RELATIONS = (RelationType.CAUSED_BY, RelationType.RESOLVED_BY)


def load_context(
    store: Store,
    scope: AgentScope,
    inp: ContextInput,
    session: str | None,
    now: datetime,
    tokens: Counter,
    copies: int = 1,
    due: Sequence[tuple[ReviewCard, Fragment]] = (),
) -> ContextResult:
    """Core memory (important fragments of the given types) plus the session's working memory,
    while the whole result as sent (compact, or verbose with the rendered markdown) fits the
    budget; working memory gets up to half of it when there is any. `due` spaced reviews (004
    §4.2) come after working memory, within a quarter of what is left (`reviews`: those shown)."""
    verbose = inp.verbose
    envelope = ContextResult(
        core_memory=[],
        working_memory=[],
        total_tokens=inp.tokenBudget,
        token_budget=inp.tokenBudget,
        rendered="" if verbose else None,
        reviews=[] if due else None,
        verbose=verbose,
    )
    budget = WireBudget(tokens, inp.tokenBudget, copies, envelope.dump())
    if verbose:  # the rendered markdown repeats each memory: its lines are paid for with the items
        budget.used += tokens.count("## Core memory\n\n## Working memory (this session)") * budget.copies
    working = store.list_fragments(scope, SearchFilter(session_id=session, only_session=True), 200) if session else []
    work_ceiling = budget.used + (inp.tokenBudget - budget.used) // 2 if working else budget.used
    work_items = _fill(budget, working, verbose, work_ceiling, tokens)
    shown = _fill_reviews(budget, due, verbose, budget.used + (inp.tokenBudget - budget.used) // 4, tokens)
    core_items = _fill(budget, store.list_fragments(scope, SearchFilter(types=tuple(inp.types)), 500), verbose, None, tokens)
    store.record_access([f.id for f in core_items + work_items], now)
    rendered = None
    if verbose:
        lines = ["## Core memory"] + [_line(f) for f in core_items]
        if session:
            lines += ["", "## Working memory (this session)"] + [_line(f) for f in work_items]
        if shown:
            lines += ["", REVIEW_HEADING] + [_review_line(r) for r in shown]
        rendered = "\n".join(lines)
    return ContextResult(
        core_memory=views(core_items),
        working_memory=views(work_items),
        total_tokens=budget.used,
        token_budget=inp.tokenBudget,
        rendered=rendered,
        reviews=shown if due else None,
        verbose=verbose,
    )


REVIEW_HEADING = "## Due for review"


def _review_line(review: ReviewView) -> str:
    return f"- {review.preview} (id {review.id})"


def _fill_reviews(
    budget: WireBudget, due: Sequence[tuple[ReviewCard, Fragment]], verbose: bool, ceiling: int, tokens: Counter
) -> list[ReviewView]:
    """The leading due reviews that fit under `ceiling` (verbose: with their rendered lines)."""
    taken: list[ReviewView] = []
    if verbose and due:
        budget.used += (tokens.count("\n\n" + REVIEW_HEADING) + 1) * budget.copies
    for card, fragment in due:
        view = ReviewView(id=fragment.id, preview=preview(fragment.content), reviews=card.reviews)
        extra = (tokens.count(_review_line(view)) + 1) * budget.copies if verbose else 0
        budget.used += extra
        if not budget.take(view.dump(), ceiling):
            budget.used -= extra
            break
        taken.append(view)
    return taken


def _line(f: Fragment) -> str:
    return f"- [{f.type.value}] {f.content} (id {f.id})"


def _fill(budget: WireBudget, fragments: list[Fragment], verbose: bool, ceiling: int | None, tokens: Counter) -> list[Fragment]:
    """The leading fragments that fit; in verbose form each also pays for its rendered line."""
    taken = []
    for fragment in fragments:
        view = FragmentView.of(fragment)
        item = view.dump() if verbose else view.brief()
        extra = (tokens.count(_line(fragment)) + 1) * budget.copies if verbose else 0
        budget.used += extra
        if not budget.take(item, ceiling):
            budget.used -= extra
            break
        taken.append(fragment)
    return taken


def explore(store: Store, scope: AgentScope, inp: GraphExploreInput, linkages: LinkageStore | None = None) -> GraphResult:
    """Follow caused_by / resolved_by edges (both directions) from a fragment, `inp.depth` hops;
    with `linkages`, the seed 003 linkages of the memories visited come along (items and files
    are not fragments, so they are listed beside the walk rather than walked)."""
    start = store.get_many(scope, [inp.startId])
    if not start:
        raise NotFound(f"fragment {inp.startId!r} not found", missing=(inp.startId,))
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
    held = linkages.linkages_of(scope, list(nodes)) if linkages is not None else {}
    listed = [_node_linkage(x) for fid in nodes for x in held.get(fid, [])]
    return GraphResult(
        start=FragmentView.of(start[0]),
        nodes=views([f for fid, f in nodes.items() if fid != start[0].id]),
        edges=[Edge(from_=a, to=b, relation=r) for (a, b), r in edges.items()],
        linkages=listed or None,
        verbose=inp.verbose,
    )


def _node_linkage(linkage: Linkage) -> NodeLinkage:
    if linkage.kind == "file":
        return NodeLinkage(from_=linkage.fragment_id, type="file", path=linkage.target, label=linkage.label)
    return NodeLinkage(from_=linkage.fragment_id, type=linkage.kind, id=linkage.target, label=linkage.label)
