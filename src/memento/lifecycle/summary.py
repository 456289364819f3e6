"""The text of a working-memory summary (004 §3 wm_buffer, §5.1 summarize_thread): a session's
items in, one episodic memory's text out.

Two drafts: `extractive` is deterministic and needs nothing (the items themselves, deduplicated,
the most informative first when they do not all fit the token cap, shown in the order they were
written); `drafted` asks a language model (`models.Complete`) and raises `errors.Unavailable` or
`EmptyAnswer`, after which the caller uses `extractive`. docs/lifecycle.md "Working memory's end".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from ..analysis import query_terms
from ..models import Complete, Fragment, FragmentType

CountTokens = Callable[[str], int]

TITLE_CHARS = 200
SUBSET_CHECK_LIMIT = 500  # items compared pairwise for "says nothing another item does not"
PROMPT_TOKENS = 6000  # the items a model is shown, at most
TRAILER_TOKENS = 12  # room kept for "(+N more notes)"
# Kinds worth naming in a line; facts and observations are what working memory holds anyway.
NAMED_KINDS = {
    FragmentType.DECISION,
    FragmentType.ERROR,
    FragmentType.PREFERENCE,
    FragmentType.PROCEDURE,
    FragmentType.LEARNING,
    FragmentType.PATTERN,
}

SYSTEM = """You write the episodic memory of one working session of an AI agent.

You are given the session's working-memory notes in the order they were written. Write one short,
faithful summary that a later session can rely on: what was worked on, what was decided or found,
what was left open. Keep names, numbers, versions and paths exactly as written. Do not invent
anything. Answer with the summary only: plain text, no preamble, no heading."""


class EmptyAnswer(ValueError):
    """The model answered with no usable text."""


def one_line(text: str) -> str:
    return " ".join(text.split())


def line_of(item: Fragment) -> str:
    """An item as a summary line: its text on one line, its kind named when that says something."""
    text = one_line(item.content)
    return f"- [{item.type.value}] {text}" if item.type in NAMED_KINDS else f"- {text}"


def distinct(items: Sequence[Fragment]) -> list[Fragment]:
    """The items in order without repeats: the same words again, or an item whose every term another
    (longer) item also has, says nothing new."""
    seen: set[tuple[str, ...]] = set()
    kept: list[tuple[Fragment, frozenset[str]]] = []
    for item in items:
        terms = query_terms(item.content)
        key = tuple(terms) or (one_line(item.content).casefold(),)
        if key in seen:
            continue
        seen.add(key)
        kept.append((item, frozenset(terms)))
    if len(kept) > SUBSET_CHECK_LIMIT:
        return [item for item, _ in kept]
    return [
        item for i, (item, terms) in enumerate(kept) if not terms or not any(j != i and terms < other for j, (_, other) in enumerate(kept))
    ]


def heading(items: Sequence[Fragment], title: str | None) -> str:
    """The summary's first line: the caller's title, else the session's date and main topics."""
    if title and title.strip():
        return one_line(title)[:TITLE_CHARS]
    topics = [topic for topic, _ in Counter(i.topic for i in items).most_common(3)]
    day = min(i.created_at for i in items).date().isoformat()
    return f"Session of {day}: {len(items)} working-memory note{'s' if len(items) != 1 else ''} on {', '.join(topics)}"


def fit(text: str, count: CountTokens, budget: int) -> str:
    """`text` cut (on a word boundary, with an ellipsis) to at most `budget` tokens."""
    if count(text) <= budget:
        return text
    words = text.split(" ")
    low, high = 0, len(words)
    while low < high:  # the most words that still fit
        mid = (low + high + 1) // 2
        if count(" ".join(words[:mid]) + "…") <= budget:
            low = mid
        else:
            high = mid - 1
    return " ".join(words[:low]) + "…" if low else ""


def choose(items: Sequence[Fragment], count: CountTokens, budget: int) -> list[Fragment]:
    """The most informative items that fit `budget` tokens together (greedy: each pick adds the most
    terms not yet covered, weighted by importance), returned in their original order."""
    lines = {item.id: line_of(item) for item in items}
    terms = {item.id: set(query_terms(item.content)) for item in items}
    cost = {item.id: count(lines[item.id]) + 1 for item in items}
    covered: set[str] = set()
    chosen: set[str] = set()
    left = budget
    while True:
        best: tuple[float, Fragment] | None = None
        for item in items:
            if item.id in chosen or cost[item.id] > left:
                continue
            gain = len(terms[item.id] - covered) * (0.5 + item.importance)
            if gain > 0 and (best is None or gain > best[0]):
                best = (gain, item)
        if best is None:
            break
        chosen.add(best[1].id)
        covered |= terms[best[1].id]
        left -= cost[best[1].id]
    return [item for item in items if item.id in chosen]


def extractive(items: Sequence[Fragment], count: CountTokens, cap: int, title: str | None = None) -> str:
    """A deterministic summary of `items` (in the order written) within `cap` tokens: a heading,
    then one line per distinct item, the most informative first when they do not all fit."""
    unique = distinct(items)
    head = fit(heading(items, title), count, max(cap // 3, 1))
    room = cap - count(head) - 1
    everything = [line_of(i) for i in unique]
    if sum(count(line) + 1 for line in everything) <= room:
        return "\n".join([head, *everything])
    picked = choose(unique, count, room - TRAILER_TOKENS)
    lines = [line_of(i) for i in picked]
    if not lines and unique:  # not even one whole line fits: the most important one, cut
        first = max(unique, key=lambda i: i.importance)
        picked, lines = [first], [fit(line_of(first), count, room - TRAILER_TOKENS)]
    more = len(unique) - len(picked)
    trailer = [f"(+{more} more note{'s' if more != 1 else ''})"] if more else []
    return "\n".join([head, *lines, *trailer])


def prompt_of(items: Sequence[Fragment], count: CountTokens, cap: int) -> str:
    """The user prompt of `drafted`: the notes in order (the most informative when too many)."""
    unique = distinct(items)
    shown = unique if sum(count(line_of(i)) + 1 for i in unique) <= PROMPT_TOKENS else choose(unique, count, PROMPT_TOKENS)
    notes = "\n".join(f"{n}. ({i.topic}) {line_of(i)[2:]}" for n, i in enumerate(shown, start=1))
    words = max(cap * 3 // 4, 20)  # about 0.75 words per token
    return f"Working-memory notes of the session, oldest first:\n{notes}\n\nSummarize them in at most {words} words."


def drafted(model: Complete, items: Sequence[Fragment], count: CountTokens, cap: int, title: str | None = None) -> str:
    """A language model's summary of `items`, cut to `cap` tokens (after the title, when given).
    Raises errors.Unavailable (the model did not answer) or EmptyAnswer."""
    answer = model(prompt_of(items, count, cap), SYSTEM, cap).strip()
    if not answer:
        raise EmptyAnswer("the model answered with no text")
    if title and title.strip():
        head = one_line(title)[:TITLE_CHARS]
        return head + "\n" + fit(answer, count, max(cap - count(head) - 1, 1))
    return fit(answer, count, cap)
