"""Distillation by a language model: the prompt, and the strict reading of its answer.

The model is asked for a JSON array of `{"content", "type", "tags"}` items. Its answer is used only
when it is exactly that (a code fence around it, or an object holding the array under `memories`
or `items`, is tolerated; anything else is not): an answer that is not JSON, an item without text
or with a type outside the four, a tag that is not a short string, all make the whole answer
unusable, and distillation falls back to the heuristic (reported as the result's `fallback`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError

from ..models import Complete
from .distill_heuristic import Candidate

MAX_ANSWER_TOKENS = 1500
MAX_ITEM_CHARS = 1000

SYSTEM = """You turn a conversation transcript into long-term memories for an AI agent.

Keep only what a careful person would want to know in a later session:
- decisions that were made (what was chosen, and why when stated),
- facts about people, projects, systems and configuration (names, numbers, dates, versions, paths),
- observations and lessons (what turned out to be true, what the fix was, what caused a problem),
- instructions for the future (always / never / make sure), including stated preferences.
Leave out greetings, questions, thanks, small talk, and what the assistant says it is doing.

Each memory is one self-contained sentence that still makes sense without the transcript: name the
project, person or thing it is about, and keep exact values (versions, numbers, dates, paths) as
written. Do not invent anything that is not in the transcript.

Answer with JSON only, no prose and no code fence: an array of objects
{"content": "<the memory>", "type": "fact" | "decision" | "observation" | "instruction", "tags": ["<short lowercase tag>", ...]}
Answer [] when nothing is worth keeping."""

FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL | re.IGNORECASE)
ModelTag = Annotated[str, StringConstraints(strip_whitespace=True, to_lower=True, min_length=1, max_length=100)]


class InvalidAnswer(ValueError):
    """The model's answer is not the JSON asked for."""


class _Item(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    content: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_ITEM_CHARS)]
    type: Literal["fact", "decision", "observation", "instruction", "preference"]
    tags: list[ModelTag] = Field(default_factory=list, max_length=10)


_ITEMS = TypeAdapter(list[_Item])


def prompt_for(turns: Sequence[tuple[str | None, str]], limit: int) -> str:
    """The user message: the transcript, one turn per paragraph, and how many memories at most."""
    lines = [f"{role}: {text.strip()}" if role else text.strip() for role, text in turns]
    transcript = "\n\n".join(line for line in lines if line)
    return f"Extract at most {limit} memories from this transcript.\n\nTRANSCRIPT:\n{transcript}"


def parse_answer(answer: str, limit: int) -> list[Candidate]:
    """The candidates of a model's answer (at most `limit`); InvalidAnswer when it is not as asked."""
    fenced = FENCE.match(answer)
    text = fenced.group(1) if fenced else answer.strip()
    try:
        parsed = json.loads(text)
    except ValueError:
        raise InvalidAnswer(f"the answer is not JSON (it starts {answer.strip()[:60]!r})") from None
    if isinstance(parsed, dict) and len(parsed) == 1 and isinstance(next(iter(parsed.values())), list):
        key = next(iter(parsed))
        if key not in ("memories", "items"):
            raise InvalidAnswer(f"the answer is an object with {key!r}, not an array of memories")
        parsed = parsed[key]
    if not isinstance(parsed, list):
        raise InvalidAnswer(f"the answer is a JSON {type(parsed).__name__}, not an array of memories")
    try:
        items = _ITEMS.validate_python(parsed)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidAnswer(f"item {where}: {first['msg']}") from None
    return [
        Candidate(item.content, "fact" if item.type == "preference" else item.type, tuple(dict.fromkeys(item.tags)))
        for item in items[:limit]
    ]


def llm_extract(complete: Complete, turns: Sequence[tuple[str | None, str]], limit: int) -> list[Candidate]:
    """The model's candidates; raises Unavailable (no answer) or InvalidAnswer (an unusable one)."""
    return parse_answer(complete(prompt_for(turns, limit), SYSTEM, MAX_ANSWER_TOKENS), limit)
