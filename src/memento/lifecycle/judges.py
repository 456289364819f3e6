"""How the evaluator judges one memory against its most similar neighbours (000 §7).

Two judges: `heuristic` (offline, deterministic, the default) scores informational value,
specificity and actionability from the text and finds contradictions among close neighbours by
negation or number mismatch (sleep_text's test); `ModelJudge` asks a language model (an
OpenAI-compatible server, Gemini, or the MCP client's model through sampling) for the same
judgement as strict JSON.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import MementoError
from ..models import Complete, Fragment, FragmentType
from .sleep_text import texts_conflict

CONTRADICTION_SIMILARITY = 0.6  # calibrated: close enough to be about the same thing
MAX_NEIGHBOUR_CHARS = 400
MAX_MEMORY_CHARS = 2000
ANSWER_TOKENS = 256

_WORD = re.compile(r"[\w'’-]+", re.UNICODE)
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d{1,2}\b", re.I)
_IDENTIFIER = re.compile(r"[\w-]+(?:[./:_][\w-]+)+|`[^`]+`")
_HEDGE = re.compile(r"\b(?:maybe|perhaps|probably|possibly|might|i think|i guess|seems?|apparently|not sure|unclear|somewhat)\b", re.I)
_IMPERATIVE = re.compile(
    r"^(?:always|never|use|run|set|avoid|call|install|configure|prefer|add|remove|check|make|keep|do|don't|restart|deploy|enable|disable)\b",
    re.I,
)
_DIRECTIVE = re.compile(r"\b(?:should|must|need to|has to|to fix|fixed by|because|instead of|in order to|requires?)\b", re.I)
_ACTIONABLE_TYPES = {FragmentType.PROCEDURE: 0.3, FragmentType.DECISION: 0.25, FragmentType.ERROR: 0.25, FragmentType.PREFERENCE: 0.2}


@dataclass(frozen=True)
class Neighbour:
    """A memory of the same agent close to the one judged, with its calibrated similarity."""

    fragment: Fragment
    similarity: float


@dataclass(frozen=True)
class Judgement:
    """The three scores (0-1), their utility, the neighbours contradicted, and what it cost."""

    informational: float
    specificity: float
    actionability: float
    utility: float
    contradicts: tuple[str, ...] = ()
    provider: str = "heuristic"
    tokens: int = 0
    fallback: str | None = None  # why a model's answer was not used
    extra: dict[str, object] = field(default_factory=dict)


class InvalidAnswer(MementoError):
    """A model answered, but not with the JSON asked for."""


def _clip(value: float) -> float:
    return round(min(1.0, max(0.0, value)), 4)


def utility_of(informational: float, specificity: float, actionability: float, duplication: float) -> float:
    """0.35·informational + 0.35·specificity + 0.3·actionability, less up to half for a memory
    that repeats a neighbour (duplication 0-1)."""
    base = 0.35 * informational + 0.35 * specificity + 0.3 * actionability
    return _clip(base * (1.0 - 0.5 * duplication))


def older(a: Fragment, b: Fragment) -> bool:
    """Whether `a` was stored before `b` (creation time, then insertion order)."""
    return (a.created_at, a.seq) < (b.created_at, b.seq)


def duplication_of(memory: Fragment, neighbours: Sequence[Neighbour], contradicted: Sequence[str] = ()) -> float:
    """How much `memory` repeats an older neighbour it does not contradict (a contradiction is
    no repetition; the original keeps its value): 0 below a calibrated similarity of 0.7, 1 at identical."""
    closest = max((n.similarity for n in neighbours if n.fragment.id not in contradicted and older(n.fragment, memory)), default=0.0)
    return _clip((closest - 0.7) / 0.3)


def heuristic(memory: Fragment, neighbours: Sequence[Neighbour]) -> Judgement:
    """The offline judgement: text features and, for contradictions, close neighbours that
    differ by a negation or by their numbers."""
    text = memory.detail or memory.content
    words = _WORD.findall(text)
    count = len(words)
    numbers = len(_NUMBER.findall(text))
    names = sum(1 for i, w in enumerate(words) if i and w[:1].isupper())
    identifiers = len(_IDENTIFIER.findall(text)) + len(_DATE.findall(text))
    hedges = len(_HEDGE.findall(text))
    length = 1.0 - math.exp(-count / 12.0)  # a handful of words says little; 25+ says something
    informational = _clip(0.6 * length + 0.15 * min(1, numbers) + 0.15 * min(1, names) + 0.1 * min(1, identifiers) - 0.15 * hedges)
    specificity = _clip(0.3 + 0.2 * min(2, numbers) + 0.15 * min(2, names) + 0.15 * min(2, identifiers) - 0.2 * hedges)
    imperative = 0.4 if _IMPERATIVE.search(text.strip()) else 0.0
    directive = 0.25 if _DIRECTIVE.search(text) else 0.0
    actionability = _clip(0.25 + imperative + directive + _ACTIONABLE_TYPES.get(memory.type, 0.0))
    contradicts = tuple(n.fragment.id for n in neighbours if contradicts_heuristically(text, n))
    utility = utility_of(informational, specificity, actionability, duplication_of(memory, neighbours, contradicts))
    return Judgement(informational, specificity, actionability, utility, contradicts)


def contradicts_heuristically(text: str, neighbour: Neighbour) -> bool:
    """About the same thing (high similarity), and a sentence of each says nearly the same words
    but one denies what the other says, or the same words with other numbers (sleep_text's test:
    two lines of one template that name different things are not a contradiction)."""
    if neighbour.similarity < CONTRADICTION_SIMILARITY:
        return False
    return texts_conflict(text, neighbour.fragment.detail or neighbour.fragment.content)


# ---------------------------------------------------------------- a model's judgement

SYSTEM = (
    "You evaluate one memory an AI agent stored, for a memory system. Score it from 0 to 1 on: "
    "informational (does it carry real information?), specificity (concrete names, numbers, dates, identifiers, no hedging), "
    "actionability (can the agent act on it?). List the ids of the similar memories that it contradicts "
    "(they state the opposite, or a different value for the same thing). "
    'Answer with one JSON object only: {"informational": 0.0, "specificity": 0.0, "actionability": 0.0, "contradicts": ["id"]}'
)


def prompt_for(memory: Fragment, neighbours: Sequence[Neighbour]) -> str:
    """The user message: the memory, then its neighbours by id."""
    text = (memory.detail or memory.content)[:MAX_MEMORY_CHARS]
    lines = [f"Memory ({memory.type.value}, topic {memory.topic}):", text, "", "Similar memories:"]
    lines += [f"[{n.fragment.id}] {(n.fragment.detail or n.fragment.content)[:MAX_NEIGHBOUR_CHARS]}" for n in neighbours] or ["(none)"]
    return "\n".join(lines)


def parse_answer(answer: str, neighbour_ids: Sequence[str]) -> tuple[float, float, float, tuple[str, ...]]:
    """The scores and contradicted ids of a model's answer: one JSON object (optionally in a
    ```json fence), three numbers in [0, 1], a list of known ids. Anything else: InvalidAnswer."""
    text = answer.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, re.S)
    if fenced:
        text = fenced.group(1)
    try:
        parsed = json.loads(text)
    except ValueError:
        raise InvalidAnswer("the model's answer is not JSON") from None
    if not isinstance(parsed, dict):
        raise InvalidAnswer("the model's answer is not a JSON object")
    scores = []
    for key in ("informational", "specificity", "actionability"):
        value = parsed.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise InvalidAnswer(f"the model's answer has no {key} score between 0 and 1")
        scores.append(float(value))
    ids = parsed.get("contradicts", [])
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise InvalidAnswer("the model's answer has no list of ids in 'contradicts'")
    unknown = [i for i in ids if i not in neighbour_ids]
    if unknown:
        raise InvalidAnswer(f"the model's answer names unknown memories: {unknown[:3]}")
    return scores[0], scores[1], scores[2], tuple(dict.fromkeys(ids))


def estimate_tokens(*texts: str) -> int:
    """Tokens of a model call, estimated as 000 §9.5's fallback does (ceil(characters / 4))."""
    return sum(math.ceil(len(t) / 4) for t in texts)


class ModelJudge:
    """A language model's judgement; an invalid answer is asked once more, then the heuristic's
    judgement is used (with `fallback` saying why). A model that cannot answer raises Unavailable."""

    def __init__(self, complete: Complete, provider: str) -> None:
        self.complete = complete
        self.provider = provider

    def __call__(self, memory: Fragment, neighbours: Sequence[Neighbour]) -> Judgement:
        prompt = prompt_for(memory, neighbours)
        ids = [n.fragment.id for n in neighbours]
        tokens = 0
        problem = ""
        for _ in range(2):
            answer = self.complete(prompt, SYSTEM, ANSWER_TOKENS)
            tokens += estimate_tokens(SYSTEM, prompt, answer)
            try:
                informational, specificity, actionability, contradicts = parse_answer(answer, ids)
            except InvalidAnswer as exc:
                problem = str(exc)
                continue
            utility = utility_of(informational, specificity, actionability, duplication_of(memory, neighbours, contradicts))
            return Judgement(informational, specificity, actionability, utility, contradicts, self.provider, tokens)
        fallback = heuristic(memory, neighbours)
        return Judgement(
            fallback.informational,
            fallback.specificity,
            fallback.actionability,
            fallback.utility,
            fallback.contradicts,
            "heuristic",
            tokens,
            fallback=f"{self.provider}: {problem}",
        )
