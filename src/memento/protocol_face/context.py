"""Seed 003's context call (`POST /v1/context`, `memento_context`): one call that returns what an
agent needs for a message — its open working-memory items, the memories the message recalls,
skip-list warnings and its identity crystal — each switchable with `include`, within a token
budget.

Parts are gathered from the face's other parts (items, memories, skips, identity). The budget is
spent in order of what matters most to an agent about to act: the skip warnings (small, and they
say what not to do), the identity, then working-memory items by priority, then recalled memories
by score; what does not fit is left out and counted in `meta.omitted`, and `meta.truncated` says
so. The identity is cut (with an ellipsis) rather than dropped when it alone exceeds what is left.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, Strict, StringConstraints

from ..analysis import query_terms
from ..fields import OperationInput
from ..graph_results import SeedResult
from ..models import CallContext
from ..results import preview

if TYPE_CHECKING:
    from . import ProtocolFace

Part = Literal["working_memory", "memories", "skip_list", "identity", "reviews"]
PARTS: tuple[Part, ...] = ("working_memory", "memories", "skip_list", "identity", "reviews")
MAX_MESSAGE_CHARS = 20_000
DEFAULT_BUDGET = 4_000
MAX_ITEMS = 50


class ContextCallInput(OperationInput):
    """003's context call."""

    message: Annotated[str, Strict(), StringConstraints(max_length=MAX_MESSAGE_CHARS)] = Field(
        default="", description="The message the agent is about to answer; memories and skip warnings are matched against it."
    )
    include: list[Part] | None = Field(
        default=None,
        min_length=1,
        max_length=5,
        description="Parts to return (default all): working_memory, memories, skip_list, identity, reviews.",
    )
    limit: Annotated[int, Strict(), Field(ge=1, le=50)] = Field(default=10, description="Most memories to return.")
    token_budget: Annotated[int, Strict(), Field(ge=100, le=100_000)] = Field(
        default=DEFAULT_BUDGET, description="Most tokens (cl100k) the returned parts may take together."
    )


class ContextItem(SeedResult):
    id: str
    category: str
    title: str
    content: str | None = None
    status: str
    priority: int
    tags: list[str]
    next_action: str | None = None
    updated_at: str | None = None


class WorkingMemoryPart(SeedResult):
    items: list[ContextItem]
    total_active: int = Field(description="Active and paused items, including any left out for the budget.")


class ContextMatch(SeedResult):
    id: str
    content: str
    type: str
    tags: list[str]
    score: float
    created_at: str | None = None


class MemoriesPart(SeedResult):
    matches: list[ContextMatch]
    query_terms: list[str]
    ranking: str = "hybrid"


class SkipWarning(SeedResult):
    id: str
    item: str
    reason: str
    expires: str
    match: str = Field(description="How the message matched the entry: words or meaning.")


class ContextReview(SeedResult):
    """A due spaced review (004 §4.2): a memory worth looking at again."""

    id: str
    preview: str
    reviews: int = Field(description="Reviews so far.")


class ContextMeta(SeedResult):
    workspace: str | None
    namespace: str
    last_updated: str
    tokens: int = Field(description="Tokens (cl100k) the returned parts take.")
    token_budget: int
    truncated: bool
    omitted: dict[str, int] = Field(default_factory=dict, description="What was left out for the budget, per part.")


class ContextCallResult(SeedResult):
    meta: ContextMeta
    working_memory: WorkingMemoryPart | None = None
    memories: MemoriesPart | None = None
    skip_matches: list[SkipWarning] | None = None
    identity: str | None = None
    reviews: list[ContextReview] | None = None


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return str(value)


class Budget:
    """Tokens left for the parts, counted as the parts' JSON."""

    def __init__(self, face: ProtocolFace, total: int) -> None:
        self.count = face.service.factory.tokens.count
        self.left = total
        self.omitted: dict[str, int] = {}

    def take(self, part: str, value: SeedResult | str) -> bool:
        cost = self.count(value if isinstance(value, str) else value.model_dump_json())
        if cost > self.left:
            self.omitted[part] = self.omitted.get(part, 0) + 1
            return False
        self.left -= cost
        return True

    def cut(self, text: str) -> str | None:
        """`text`, or as much of it as fits (ending in an ellipsis); None when nothing fits."""
        if self.take("identity", text):
            return text
        self.omitted.pop("identity", None)
        low, high = 0, len(text)
        while low < high:  # the longest prefix that fits
            mid = (low + high + 1) // 2
            if self.count(text[:mid] + "…") <= self.left:
                low = mid
            else:
                high = mid - 1
        if low < 20:
            self.omitted["identity"] = 1
            return None
        kept = text[:low] + "…"
        self.left -= self.count(kept)
        self.omitted["identity_cut"] = 1
        return kept


class ContextCall:
    """The context call over the face's parts."""

    def __init__(self, face: ProtocolFace) -> None:
        self.face = face

    def __call__(self, inp: ContextCallInput, ctx: CallContext) -> ContextCallResult:
        face = self.face
        scope = face.read_scope(ctx)
        parts = set(inp.include or PARTS)
        budget = Budget(face, inp.token_budget)
        message = inp.message.strip()
        skip_matches: list[SkipWarning] | None = None
        if "skip_list" in parts:
            skip_matches = []
            for found in face.skips.matches(message, ctx) if message else []:
                warning = SkipWarning(
                    id=found.id, item=found.item, reason=found.reason, expires=_iso(found.expires) or "", match=found.match
                )
                if budget.take("skip_list", warning):
                    skip_matches.append(warning)
        identity: str | None = None
        if "identity" in parts:
            latest = face.identity.latest(ctx)
            if latest is not None and latest.crystal:
                identity = budget.cut(latest.crystal)
        working: WorkingMemoryPart | None = None
        if "working_memory" in parts:
            open_items = face.items.for_context(ctx)
            kept: list[ContextItem] = []
            for item in open_items[:MAX_ITEMS]:
                view = ContextItem(
                    id=item.id,
                    category=item.category,
                    title=item.title,
                    content=item.content or None,
                    status=item.status,
                    priority=item.priority,
                    tags=list(item.tags),
                    next_action=item.next_action or None,
                    updated_at=_iso(item.updated_at),
                )
                if budget.take("working_memory", view):
                    kept.append(view)
            if len(open_items) > MAX_ITEMS:
                budget.omitted["working_memory"] = budget.omitted.get("working_memory", 0) + len(open_items) - MAX_ITEMS
            working = WorkingMemoryPart(items=kept, total_active=len(open_items))
        reviews: list[ContextReview] | None = None
        if "reviews" in parts:  # after the open work, before the recalled memories; shown is reviewed
            reviews, now = [], face.service.clock()
            due = face.service.reviews.due(scope, now, face.service.settings.review_shown)
            for card, fragment in due:
                review = ContextReview(id=fragment.id, preview=preview(fragment.content), reviews=card.reviews)
                if budget.take("reviews", review):
                    reviews.append(review)
            shown = {r.id for r in reviews}
            face.service.reviews.shown(scope, [card for card, f in due if f.id in shown], now)
        memories: MemoriesPart | None = None
        if "memories" in parts:
            matches: list[ContextMatch] = []
            for hit in face.memories.search(message, ctx, inp.limit) if message else []:
                match = ContextMatch(
                    id=hit.id,
                    content=hit.content,
                    type=hit.type,
                    tags=list(hit.tags),
                    score=round(float(hit.score or 0.0), 3),
                    created_at=_iso(hit.created_at),
                )
                if budget.take("memories", match):
                    matches.append(match)
            memories = MemoriesPart(matches=matches, query_terms=query_terms(message) if message else [])
        omitted = {k: v for k, v in budget.omitted.items() if k != "identity_cut"}
        meta = ContextMeta(
            workspace=ctx.workspace,
            namespace=scope.agent_id,
            last_updated=_iso(face.service.clock()) or "",
            tokens=inp.token_budget - budget.left,
            token_budget=inp.token_budget,
            truncated=bool(budget.omitted),
            omitted=omitted,
        )
        return ContextCallResult(
            meta=meta, working_memory=working, memories=memories, skip_matches=skip_matches, identity=identity, reviews=reviews
        )
