"""The plain records every importer produces, and the helpers the parsers share.

A parser reads a foreign store into `Parsed`: import records (what `remember` will be called
with), links between them by the parser's own keys, and the source items it skipped with a
reason. Nothing here touches a store; the writer (memento.importers.writer) does that.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from ..errors import InvalidArgument
from ..fields import MAX_INPUT_CHARS
from ..models import FragmentType, RelationType

CHUNK_CHARS = MAX_INPUT_CHARS  # one memory holds this much: over 300 characters is kept whole as its detail


class ImportFormatError(InvalidArgument):
    """The input is not valid in its format; names the file and the line or record."""


def json_lines(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(file:line, object) for each non-blank line of a JSON Lines file; a line that is not a JSON
    object is a format error naming it."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ImportFormatError(f"{where}: not JSON ({exc.msg})") from None
        if not isinstance(item, dict):
            raise ImportFormatError(f"{where}: expected a JSON object")
        yield where, item


@dataclass(frozen=True)
class ImportRecord:
    """One memory to store: the fields of `remember`, where it came from, and its key.

    `extra` holds further `remember` parameters by their wire names (isAnchor, confidence,
    expiresAt, ...) for formats that carry them; `agent` is the namespace recorded in the source
    (Memento's own export), `keep_id` an id to reuse when it is free."""

    key: str  # the parser's own key, unique in the file; links refer to it
    where: str  # file:line or file#record, for messages
    content: str
    topic: str
    type: FragmentType
    source: str | None  # provenance, e.g. import:mem0 (Memento's export keeps each memory's own)
    keywords: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    created_at: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    context: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    agent: str | None = None
    keep_id: str | None = None


@dataclass(frozen=True)
class ImportLink:
    """A directed edge between two records, by key."""

    from_key: str
    to_key: str
    relation: RelationType
    where: str
    agent: str | None = None


@dataclass(frozen=True)
class ImportEntity:
    """A named entity of seed 001's graph (Memento's export): its name is its identity."""

    name: str
    entity_type: str
    where: str
    description: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    agent: str | None = None


@dataclass(frozen=True)
class ImportRelation:
    """A typed relation between two entities, by name."""

    source: str
    target: str
    relation_type: str
    where: str
    strength: float = 0.5
    confidence: float = 1.0
    context: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    agent: str | None = None


@dataclass(frozen=True)
class ImportEntityLink:
    """An entity's association with a record (by the record's key)."""

    entity: str
    record_key: str
    relevance: float
    where: str
    agent: str | None = None


@dataclass(frozen=True)
class Skipped:
    """A source item left out, and why."""

    where: str
    reason: str


@dataclass
class Parsed:
    """What a parser read from one input."""

    format: str
    records: list[ImportRecord] = field(default_factory=list)
    links: list[ImportLink] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    agents: list[str] = field(default_factory=list)  # namespaces the source names (Memento's export)
    entities: list[ImportEntity] = field(default_factory=list)  # seed 001's graph (Memento's export)
    relations: list[ImportRelation] = field(default_factory=list)
    entity_links: list[ImportEntityLink] = field(default_factory=list)

    @property
    def read(self) -> int:
        """Source items read: records plus the records skipped."""
        return len(self.records) + len(self.skipped)


# ---------------------------------------------------------------- shared helpers


def parse_time(value: Any, where: str, name: str) -> datetime | None:
    """An ISO-8601 string (a trailing Z allowed), a date, or epoch seconds, as an aware UTC-or-given
    time; None for None or an empty string. Anything else is a format error naming `where`."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ImportFormatError(f"{where}: {name} must be a time, not {value!r}")
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            raise ImportFormatError(f"{where}: {name} {value!r} is not a valid epoch time")
        return datetime.fromtimestamp(value, UTC)
    if isinstance(value, str):
        text = value.strip()
        try:
            parsed = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        except ValueError:
            raise ImportFormatError(f"{where}: {name} {value!r} is not an ISO-8601 time") from None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    raise ImportFormatError(f"{where}: {name} must be an ISO-8601 string, not {type(value).__name__}")


def text_field(item: dict[str, Any], name: str, where: str) -> str:
    """A required string field of a JSON object; missing or not a string is a format error."""
    value = optional_text(item, name, where)
    if value is None:
        raise ImportFormatError(f"{where}: missing {name!r}")
    return value


def optional_text(item: dict[str, Any], name: str, where: str) -> str | None:
    """An optional string field of a JSON object (None when absent); a non-string is a format error."""
    value = item.get(name)
    if value is not None and not isinstance(value, str):
        raise ImportFormatError(f"{where}: {name!r} must be a string, not {type(value).__name__}")
    return value


def string_list(value: Any, where: str, name: str) -> list[str]:
    """A list of strings (None: empty); anything else is a format error."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ImportFormatError(f"{where}: {name!r} must be a list of strings")
    return list(value)


_SENTENCE_END = re.compile(r"(?<=[.!?。])\s+")


def split_content(text: str, limit: int = CHUNK_CHARS) -> list[str]:
    """Text cut into pieces of at most about `limit` characters at paragraph and sentence ends (a
    memory takes up to 20,000 characters of input: its first 300 are the content, the whole is its
    detail). A single sentence longer than the limit stays whole."""
    text = text.strip()
    if len(text) <= limit:
        return [text] if text else []
    sentences = [s.strip() for para in re.split(r"\n\s*\n", text) for s in _SENTENCE_END.split(para.replace("\n", " ")) if s.strip()]
    chunks: list[str] = []
    current = ""
    for sentence in sentences:
        joined = f"{current} {sentence}" if current else sentence
        if len(joined) <= limit or not current:
            current = joined
        else:
            chunks.append(current)
            current = sentence
    if current:
        chunks.append(current)
    return chunks


def chunked(record: ImportRecord) -> tuple[list[ImportRecord], list[ImportLink]]:
    """A record whose content is longer than one memory takes (20,000 characters), as its pieces:
    the first keeps the key, the others (`key#2`, ...) are linked to it as part_of."""
    pieces = split_content(record.content)
    if len(pieces) <= 1:
        return [record], []
    records = [
        _replace_content(record, piece, record.key if i == 1 else f"{record.key}#{i}", i, len(pieces))
        for i, piece in enumerate(pieces, start=1)
    ]
    links = [ImportLink(r.key, record.key, RelationType.PART_OF, record.where, record.agent) for r in records[1:]]
    return records, links


def _replace_content(record: ImportRecord, content: str, key: str, part: int, parts: int) -> ImportRecord:
    metadata = {**record.metadata, "part": part, "parts": parts}
    return ImportRecord(
        key=key,
        where=record.where,
        content=content,
        topic=record.topic,
        type=record.type,
        source=record.source,
        keywords=record.keywords,
        tags=record.tags,
        created_at=record.created_at,
        metadata=metadata,
        context=record.context,
        extra=record.extra,
        agent=record.agent,
        keep_id=record.keep_id if part == 1 else None,
    )


# A relation named in a source, as Memento's edge: (relation, reversed). "A causes B" is stored as
# B caused_by A; "A fixes B" as B resolved_by A; "A contains B" as B part_of A.
_RELATIONS: dict[str, tuple[RelationType, bool]] = {
    **dict.fromkeys(("part_of", "is_part_of", "belongs_to", "member_of", "child_of", "inside", "in"), (RelationType.PART_OF, False)),
    **dict.fromkeys(("contains", "includes", "has_part", "parent_of", "has"), (RelationType.PART_OF, True)),
    **dict.fromkeys(("caused_by", "is_caused_by", "because_of", "due_to", "results_from"), (RelationType.CAUSED_BY, False)),
    **dict.fromkeys(("causes", "caused", "leads_to", "results_in", "triggers"), (RelationType.CAUSED_BY, True)),
    **dict.fromkeys(("resolved_by", "fixed_by", "solved_by"), (RelationType.RESOLVED_BY, False)),
    **dict.fromkeys(("fixes", "resolves", "solves", "fixed", "resolved"), (RelationType.RESOLVED_BY, True)),
    **dict.fromkeys(("contradicts", "conflicts_with", "contradicted_by", "refutes"), (RelationType.CONTRADICTS, False)),
    **dict.fromkeys(("superseded_by", "replaced_by", "obsoleted_by"), (RelationType.SUPERSEDED_BY, False)),
    **dict.fromkeys(("supersedes", "replaces", "obsoletes"), (RelationType.SUPERSEDED_BY, True)),
    **dict.fromkeys(("derived_from", "derives_from", "based_on", "summarizes", "summarises"), (RelationType.DERIVED_FROM, False)),
    **dict.fromkeys(("source_of", "derives", "summarized_by", "summarised_by"), (RelationType.DERIVED_FROM, True)),
    **dict.fromkeys(("duplicates", "duplicate_of", "same_as"), (RelationType.DUPLICATES, False)),
}


def relation_for(name: str) -> tuple[RelationType, bool]:
    """Memento's edge for a relation name from another tool, and whether it runs the other way;
    every name without a closer match is `related`."""
    key = re.sub(r"[\s\-]+", "_", name.strip().lower())
    return _RELATIONS.get(key, (RelationType.RELATED, False))


def relation_link(from_key: str, to_key: str, name: str, where: str) -> ImportLink:
    """The link for "from NAME to" in Memento's direction."""
    relation, reverse = relation_for(name)
    return ImportLink(to_key, from_key, relation, where) if reverse else ImportLink(from_key, to_key, relation, where)
