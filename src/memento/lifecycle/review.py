"""Spaced review (004 §4.2): each namespace's most important memories get review cards that come
due at growing intervals (1, 3, 7, 14, 30, then 60, 120 … days, at most a year); a due card is
shown by `context` (000) and the 003 context call, and showing it is a review. A memory recalled
or otherwise used since its last review counts as reviewed too: the `reviews_scheduled` stage
moves its card on from the time of that use.

The stage keeps the cards of each namespace's `top` memories (pinned first, then importance ×
utility), makes the missing ones (due a day later) and drops the cards of memories that left
the top; everything in one transaction per run.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from ..models import AgentScope, Fragment
from ..storage.protocol import ReviewCard, ReviewStore, Store

INTERVALS = (1, 3, 7, 14, 30)
MAX_INTERVAL = 365
MAX_CARDS = 100_000


def next_interval(days: int) -> int:
    """The interval after one of `days`: the next step of INTERVALS, then doubling, at most MAX_INTERVAL."""
    later = [step for step in INTERVALS if step > days]
    return later[0] if later else min(MAX_INTERVAL, days * 2)


def reviewed(card: ReviewCard, at: datetime) -> ReviewCard:
    """The card after a review at `at`: the next interval, due that long after."""
    interval = next_interval(card.interval_days)
    return replace(card, reviews=card.reviews + 1, last_reviewed_at=at, interval_days=interval, due_at=at + timedelta(days=interval))


class Reviews:
    """The review cards of a store: scheduling (a consolidation stage) and surfacing (context)."""

    def __init__(self, store: Store, cards: ReviewStore, top: int) -> None:
        self.store = store
        self.cards = cards
        self.top = top

    def schedule(self, scope: AgentScope, now: datetime) -> int:
        """The `reviews_scheduled` stage: cards made or moved on by a use since their last review."""
        targets = self.cards.review_targets(scope, self.top) if self.top > 0 else []
        existing = {c.fragment_id: c for c in self.cards.review_cards(scope, None, MAX_CARDS)}
        changed: list[ReviewCard] = []
        for target in targets:
            card = existing.pop(target.fragment_id, None)
            if card is None:
                first = INTERVALS[0]
                changed.append(ReviewCard(target.fragment_id, target.agent_id, now + timedelta(days=first), first, 0, None, now))
            elif target.last_used > (card.last_reviewed_at or card.created_at):
                changed.append(reviewed(card, min(target.last_used, now)))
        if changed or existing:
            self.cards.put_reviews(scope, changed, sorted(existing))
        return len(changed)

    def due(self, scope: AgentScope, now: datetime, limit: int) -> list[tuple[ReviewCard, Fragment]]:
        """The scope's own due cards with their live memories (the longest overdue first), at most `limit`."""
        if limit <= 0 or scope.is_maintenance:
            return []
        cards = self.cards.review_cards(scope, now, limit)
        found = {f.id: f for f in self.store.get_many(scope, [c.fragment_id for c in cards])}
        return [(c, found[c.fragment_id]) for c in cards if c.fragment_id in found]

    def shown(self, scope: AgentScope, cards: list[ReviewCard], now: datetime) -> None:
        """Showing a due review is a review: each card's next interval starts now."""
        if cards:
            self.cards.put_reviews(scope, [reviewed(c, now) for c in cards], ())
