"""The token budget of a read (recall, context), spent on what is sent: each item's JSON in the
view the caller asked for, plus the result's envelope, in cl100k tokens, times the number of copies
the face sends (MCP structured output sends the JSON twice)."""

from __future__ import annotations

from typing import Any, Protocol

from ..results import wire_text

ITEM_SEPARATOR = 1  # the comma between two items of a list


class Counter(Protocol):
    def count(self, text: str) -> int: ...


class WireBudget:
    """Admits items while the whole result stays within `budget` tokens."""

    def __init__(self, counter: Counter, budget: int, copies: int, envelope: dict[str, Any]) -> None:
        self.counter = counter
        self.budget = budget
        self.copies = max(1, copies)
        self.used = self.counter.count(wire_text(envelope)) * self.copies

    def cost(self, item: dict[str, Any]) -> int:
        return (self.counter.count(wire_text(item)) + ITEM_SEPARATOR) * self.copies

    def take(self, item: dict[str, Any], limit: int | None = None) -> bool:
        """Spend the item's cost if it fits (within `limit` too, when given); false leaves the budget as it was."""
        cost = self.cost(item)
        ceiling = self.budget if limit is None else min(self.budget, limit)
        if self.used + cost > ceiling:
            return False
        self.used += cost
        return True
