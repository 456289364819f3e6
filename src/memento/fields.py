"""The field types and validators the operation inputs (memento.models) are built from: strict
scalars with the limits of seed 000 §6, tags, and the checks on JSON objects and timestamps."""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AliasChoices, AliasGenerator, BaseModel, ConfigDict, Field, Strict, StringConstraints, model_validator
from pydantic.alias_generators import to_snake

MAX_INPUT_CHARS = 20_000  # longer input is refused; up to this it is truncated to 300 chars
MAX_LIST_ITEMS = 50

AgentId = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:@-]+$")]
FragmentId = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=64)]
Topic = Annotated[str, Strict(), StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
Keyword = Annotated[str, Strict(), StringConstraints(strip_whitespace=True, min_length=1, max_length=100)]
ShortText = Annotated[str, Strict(), StringConstraints(max_length=2000)]
Content = Annotated[str, Strict(), StringConstraints(max_length=MAX_INPUT_CHARS)]
Unit = Annotated[float, Strict(), Field(ge=0.0, le=1.0)]
Budget = Annotated[int, Strict(), Field(ge=1, le=100_000)]
Tag = Annotated[str, Strict(), StringConstraints(strip_whitespace=True, to_lower=True, min_length=1, max_length=100)]
MAX_JSON_CHARS = 8_000  # metadata and originTrace, serialised


def small_json(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """A JSON object field (metadata, originTrace) stays under MAX_JSON_CHARS when serialised."""
    if value is not None and len(json.dumps(value, default=str)) > MAX_JSON_CHARS:
        raise ValueError(f"must serialise to at most {MAX_JSON_CHARS} characters of JSON")
    return value


def aware(value: datetime | None) -> datetime | None:
    """A timestamp without a zone is read as UTC."""
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def _spellings(name: str) -> AliasChoices | str:
    """A camelCase field is also accepted in snake_case (the seeds' spelling: `errors_resolved`,
    `tool_name`, `token_budget`); the schema names the camelCase one."""
    snake = to_snake(name)
    return AliasChoices(name, snake) if snake != name else name


class OperationInput(BaseModel):
    """Base of every operation input: unknown fields are refused; scalars are strictly typed.

    Every tool's parameters are camelCase (`tokenBudget`, `errorsResolved`); the snake_case
    spelling of each is accepted as an alias, but not both at once."""

    model_config = ConfigDict(
        extra="forbid", validate_by_name=True, validate_by_alias=True, alias_generator=AliasGenerator(validation_alias=_spellings)
    )

    @model_validator(mode="before")
    @classmethod
    def _one_spelling(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, snake in _two_spellings(cls):
                if name in data and snake in data:
                    raise ValueError(f"{name} and {snake} are the same parameter: give one")
        return data


@functools.cache
def _two_spellings(model: type[BaseModel]) -> tuple[tuple[str, str], ...]:
    """A model's fields that have a snake_case spelling besides their own (per class, once)."""
    return tuple((name, to_snake(name)) for name in model.model_fields if to_snake(name) != name)


def non_blank(value: str | None) -> str | None:
    """Refuses text that is empty or only whitespace."""
    if value is not None and not value.strip():
        raise ValueError("must not be empty or whitespace")
    return value
