"""The input and result of seed 003's distillation (`memento_extract`, `POST /v1/distill`), with
snake_case names as the protocol writes them."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, Strict, StrictBool, StringConstraints, model_validator

from ..fields import MAX_LIST_ITEMS, OperationInput, Tag
from .memory_models import ProtocolResult, ProtocolType

MAX_TRANSCRIPT_CHARS = 100_000  # as the reference: a longer transcript is sent in parts
MAX_MESSAGES = 2_000
DEFAULT_MAX_MEMORIES = 20
MAX_MEMORIES = 50
Method = Literal["llm", "sampling", "heuristic"]


class TranscriptMessage(OperationInput):
    # No docstring: it would be sent in every tools/list as the items' description.

    role: Annotated[str, Strict(), StringConstraints(strip_whitespace=True, min_length=1, max_length=32)] = Field(
        description="Who spoke: user, assistant, system, tool..."
    )
    content: Annotated[str, Strict()] = Field(description="What was said (text).")


class DistillInput(OperationInput):
    """A transcript in (text, or messages); its novel facts, decisions, observations and instructions stored as memories."""

    transcript: Annotated[str, Strict()] | None = Field(
        default=None, description=f"The conversation as text (at most {MAX_TRANSCRIPT_CHARS} characters); or give messages."
    )
    messages: Annotated[list[TranscriptMessage], Field(max_length=MAX_MESSAGES)] | None = Field(
        default=None, description="The conversation as {role, content} messages, instead of transcript."
    )
    tags: list[Tag] | None = Field(
        default=None, max_length=MAX_LIST_ITEMS, description="Tags added to every memory (source:distill always is)."
    )
    dry_run: StrictBool = Field(default=False, description="Return the candidates without storing anything.")
    max_memories: Annotated[int, Strict(), Field(ge=1, le=MAX_MEMORIES)] = Field(
        default=DEFAULT_MAX_MEMORIES, description=f"Most memories to extract (default {DEFAULT_MAX_MEMORIES})."
    )

    @model_validator(mode="after")
    def _one_bounded_transcript(self) -> DistillInput:
        if (self.transcript is None) == (self.messages is None):
            raise ValueError("give the conversation as transcript (text) or as messages (a list), exactly one of them")
        text = self.transcript if self.transcript is not None else "".join(m.content for m in self.messages or [])
        if len(text) > MAX_TRANSCRIPT_CHARS:
            raise ValueError(
                f"the transcript is {len(text)} characters long; at most {MAX_TRANSCRIPT_CHARS} are distilled at once: send it in parts"
            )
        if not text.strip():
            raise ValueError("the transcript is empty: there is nothing to distill")
        return self

    def turns(self) -> list[tuple[str | None, str]]:
        """The conversation as (role, text) turns; a text transcript is one turn without a role."""
        if self.transcript is not None:
            return [(None, self.transcript)]
        return [(m.role.lower(), m.content) for m in self.messages or []]


class DistilledMemory(ProtocolResult):
    """A novel memory: stored (with its id), or on a dry run a candidate that would be."""

    id: str | None = Field(description="The stored memory's id; null on a dry run.")
    content: str
    type: ProtocolType
    tags: list[str]


class SkippedCandidate(ProtocolResult):
    """A candidate not stored because something already says it."""

    content: str
    type: ProtocolType
    reason: Literal["exact", "near", "batch"] = Field(
        description="exact: the same text is stored; near: a stored memory says the same; batch: an earlier candidate of this call does."
    )
    duplicate_of: str | None = Field(description="The stored memory that says it (null for batch).")
    similarity: float | None = Field(description="Calibrated 0-1 similarity of the two texts (null when not measured).")


class DistillResult(ProtocolResult):
    """What a distillation found and stored."""

    method: Method = Field(description="llm: the configured model; sampling: the client's model; heuristic: the built-in extractor.")
    fallback: str | None = Field(
        description="Why a model's answer was not used and the heuristic ran instead (null when it was used or none was there)."
    )
    dry_run: bool
    count: int = Field(description="How many memories were stored (on a dry run: would be).")
    memories: list[DistilledMemory]
    skipped: list[SkippedCandidate]
