"""The text side of sleep consolidation (004 §4.3): which sentences a cluster of episodes agrees
on, which two episodes contradict each other, and the semantic memory's text — drafted by a
language model when one is available, else extracted from the episodes, never invented.

Two sentences *agree* when they share most of their content words (`AGREE` of the shorter one's),
state the same numbers and are both affirmative or both negated. They *conflict* when they share
nearly all their content words (`CONFLICT`) but one is negated and the other is not ("the cache
is enabled" / "the cache is disabled": a few antonyms count as the word negated), or when every
content word of the shorter one is in the other and both state numbers that differ ("the API
listens on port 8080" / "the API now listens on port 9090"). Numbers need every word: two lines
of one template ("build 101 uploaded package alpha" / "build 102 uploaded package beta") differ
in a word too, and are two facts, not one fact with two values; so do lines whose numbers differ
in more than one place. The evaluator's offline judge uses the same test (`texts_conflict`), so a
contradiction means one thing everywhere.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..analysis import STOPWORDS, stem, words
from ..errors import Unavailable
from ..models import Complete, Fragment

AGREE = 0.6
CONFLICT = 0.8
NUMBERS_CONFLICT = 1.0  # numbers differ: the shorter sentence's every content word in the other
MIN_TERMS = 2  # a sentence with fewer content words says too little to agree or conflict on
MAX_SENTENCES = 3
MAX_STATEMENT_CHARS = 600
MAX_ANSWER_TOKENS = 300
NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
SENTENCE_END = re.compile(r"(?<=[.!?。])\s+|\n+")
NEGATIONS = frozenset(
    """not no never none nothing nobody neither nor cannot can't don't doesn't didn't isn't aren't wasn't weren't
    won't wouldn't shouldn't couldn't hasn't haven't hadn't mustn't without 안 못 않 않다 않는다 않았다 없다 없음""".split()
)
# A word that says the opposite of another: counted as that word, negated ("disabled" = not "enabled").
ANTONYMS = {
    stem(a): stem(b)
    for a, b in (
        ("disabled", "enabled"),
        ("false", "true"),
        ("failed", "passed"),
        ("unavailable", "available"),
        ("invalid", "valid"),
        ("incorrect", "correct"),
        ("unsupported", "supported"),
        ("denied", "allowed"),
        ("forbidden", "allowed"),
        ("rejected", "accepted"),
        ("offline", "online"),
    )
}


@dataclass(frozen=True)
class Sentence:
    """A sentence of an episode, with what comparing it needs."""

    text: str
    terms: frozenset[str]
    numbers: frozenset[str]
    negated: bool


def parse(text: str) -> Sentence:
    tokens = words(text)
    stems = [stem(t) for t in tokens if t not in STOPWORDS and t not in NEGATIONS and not any(c.isdigit() for c in t)]
    flipped = sum(1 for t in stems if t in ANTONYMS) % 2 == 1
    negated = any(t in NEGATIONS for t in tokens) != flipped
    terms = frozenset(ANTONYMS.get(t, t) for t in stems)
    return Sentence(text.strip(), terms, frozenset(NUMBER.findall(text)), negated)


def sentences(text: str) -> list[Sentence]:
    """The sentences of a text that say enough to compare."""
    found = (parse(part) for part in SENTENCE_END.split(text) if part.strip())
    return [s for s in found if len(s.terms) >= MIN_TERMS]


def _overlap(a: Sentence, b: Sentence) -> float:
    shorter = min(len(a.terms), len(b.terms))
    return len(a.terms & b.terms) / shorter if shorter else 0.0


def agree(a: Sentence, b: Sentence) -> bool:
    return a.negated == b.negated and a.numbers == b.numbers and _overlap(a, b) >= AGREE


def conflict(a: Sentence, b: Sentence) -> bool:
    overlap = _overlap(a, b)
    if a.negated != b.negated:
        return overlap >= CONFLICT
    return _one_value_apart(a.numbers, b.numbers) and overlap >= NUMBERS_CONFLICT


def _one_value_apart(a: frozenset[str], b: frozenset[str]) -> bool:
    """Both state numbers, and one value stands in for another ("port 8080" / "port 9090"); when
    several differ ("note 3: build 3 ran on runner 21" / "note 5: build 5 ran on runner 35") the
    numbers name other things, as a template's lines do."""
    return bool(a and b) and len(a - b) == 1 and len(b - a) == 1


def texts_conflict(a: str, b: str) -> bool:
    """Whether a sentence of `a` and one of `b` contradict each other."""
    theirs = sentences(b)
    return any(conflict(x, y) for x in sentences(a) for y in theirs)


def text_of(fragment: Fragment) -> str:
    return fragment.detail or fragment.content


def conflicting_pairs(members: Sequence[Fragment]) -> list[tuple[Fragment, Fragment]]:
    """The pairs of episodes with a sentence each that contradict each other (earlier one first)."""
    parsed = [(m, sentences(text_of(m))) for m in members]
    pairs = []
    for i, (a, sa) in enumerate(parsed):
        for b, sb in parsed[i + 1 :]:
            if any(conflict(x, y) for x in sa for y in sb):
                pairs.append((a, b))
    return pairs


def agreed_sentences(members: Sequence[Fragment]) -> list[str]:
    """The sentences at least half the episodes (and at least two) say, each once, in the order
    the earliest episode says them; at most MAX_SENTENCES."""
    parsed = [sentences(text_of(m)) for m in members]
    needed = max(2, (len(members) + 1) // 2)
    chosen: list[Sentence] = []
    for own, said in enumerate(parsed):
        for sentence in said:
            support = 1 + sum(1 for other, theirs in enumerate(parsed) if other != own and any(agree(sentence, t) for t in theirs))
            if support >= needed and not any(agree(sentence, c) for c in chosen):
                chosen.append(sentence)
    return [_ending(s.text) for s in chosen[:MAX_SENTENCES]]


def _ending(text: str) -> str:
    return text if text.endswith((".", "!", "?", "。")) else text + "."


def attribution(members: Sequence[Fragment]) -> str:
    first, last = min(m.created_at for m in members), max(m.created_at for m in members)
    span = first.date().isoformat() if first.date() == last.date() else f"{first.date().isoformat()} to {last.date().isoformat()}"
    return f"(from {len(members)} episodes, {span})"


def extractive(members: Sequence[Fragment]) -> str | None:
    """What the episodes agree on, attributed; None when they agree on no sentence."""
    agreed = agreed_sentences(members)
    return f"{' '.join(agreed)} {attribution(members)}" if agreed else None


SYSTEM = """You consolidate an AI agent's episodic memories into long-term knowledge.

You are given several episodes that are about the same thing. State, in one or two sentences,
the fact, rule or preference that ALL of them support. Use only what the episodes say: keep
names, numbers, versions and paths exactly as written, and add nothing they do not state. If
they do not share a fact, answer with null.

Answer with JSON only, no prose and no code fence: {"statement": "<the sentence(s)>"} or {"statement": null}"""


def prompt_for(members: Sequence[Fragment]) -> str:
    listed = "\n".join(f"{n}. {text_of(m)}" for n, m in enumerate(members, start=1))
    return f"EPISODES:\n{listed}"


def drafted(complete: Complete, members: Sequence[Fragment]) -> str | None:
    """A model's statement of what the episodes share, attributed; None when the model has no
    usable answer (unavailable, not the JSON asked for, too long, or stating a number that no
    episode states: a fact it invented)."""
    try:
        answer = complete(prompt_for(members), SYSTEM, MAX_ANSWER_TOKENS)
    except Unavailable:
        return None
    text = answer.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    statement = parsed.get("statement") if isinstance(parsed, dict) else None
    if not isinstance(statement, str) or not statement.strip() or len(statement) > MAX_STATEMENT_CHARS:
        return None
    stated = set(NUMBER.findall(" ".join(text_of(m) for m in members)))
    if not set(NUMBER.findall(statement)) <= stated:
        return None
    return f"{_ending(statement.strip())} {attribution(members)}"
