"""Memento's own export (JSON Lines, version 1), written by `memento export`.

Line 1 is the header `{"format": "memento-export", "version": 1, "exportedAt", "memento",
"agents"}`; then one fragment per line (`"kind": "fragment"`, the wire fields of a memory plus
`agentId` and `sessionId`), then one link per line (`"kind": "link"`, `agentId`, `from`, `to`,
`relation`). Unknown keys are ignored and missing optional ones take their defaults, so a later
version's additions do not stop this reader. Ids are reused when the target store has them free.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..models import FragmentType, RelationType
from .records import (
    ImportEntity,
    ImportEntityLink,
    ImportFormatError,
    ImportLink,
    ImportRecord,
    ImportRelation,
    Parsed,
    Skipped,
    json_lines,
    optional_text,
    parse_time,
    string_list,
    text_field,
)

FORMAT = "memento"
HEADER_FORMAT = "memento-export"
VERSION = 1
# remember's parameters carried as they are (wire name -> expected JSON type)
CARRIED: dict[str, type | tuple[type, ...]] = {
    "importance": (int, float),
    "isAnchor": bool,
    "confidence": (int, float),
    "pinned": bool,
    "memorySystem": str,
    "privacyScope": str,
    "originTrace": dict,
}


def is_header(item: Any) -> bool:
    """Whether a parsed first line is a Memento export header."""
    return isinstance(item, dict) and item.get("format") == HEADER_FORMAT


def read(path: Path, now: datetime | None = None) -> Parsed:
    """Parse a Memento export; a malformed line is an error naming it."""
    parsed = Parsed(FORMAT)
    moment = now or datetime.now(UTC)
    ids: dict[str, bool] = {}  # every fragment id of the file -> whether it is imported
    header_seen = False
    for where, item in json_lines(path):
        if not header_seen:
            _header(parsed, item, where)
            header_seen = True
        elif item.get("kind") == "fragment":
            _fragment(parsed, ids, item, where, moment)
        elif item.get("kind") == "link":
            _link(parsed, ids, item, where)
        elif item.get("kind") in GRAPH_KINDS:
            GRAPH_KINDS[str(item["kind"])](parsed, ids, item, where)
        else:
            raise ImportFormatError(f"{where}: 'kind' must be one of fragment, link, {', '.join(GRAPH_KINDS)}; not {item.get('kind')!r}")
    if not header_seen:
        raise ImportFormatError(f"{path}: empty file (no memento-export header)")
    return parsed


def _header(parsed: Parsed, item: dict[str, Any], where: str) -> None:
    if not is_header(item):
        raise ImportFormatError(f'{where}: the first line must be the header {{"format": "memento-export", ...}}')
    version = item.get("version")
    if version != VERSION:
        raise ImportFormatError(f"{where}: export version {version!r} is not supported (this Memento reads versions 1 and 2)")
    parsed.agents = string_list(item.get("agents"), where, "agents")


def _fragment(parsed: Parsed, ids: dict[str, bool], item: dict[str, Any], where: str, now: datetime) -> None:
    agent = text_field(item, "agentId", where)
    fid = text_field(item, "id", where)
    if not fid or len(fid) > 64:
        raise ImportFormatError(f"{where}: 'id' must be 1 to 64 characters")
    if fid in ids:
        raise ImportFormatError(f"{where}: fragment id {fid!r} appears twice")
    ids[fid] = False
    raw_type = text_field(item, "type", where)
    try:
        type_ = FragmentType(raw_type)
    except ValueError:
        raise ImportFormatError(f"{where}: unknown type {raw_type!r}") from None
    expires = parse_time(item.get("expiresAt"), where, "expiresAt")
    if expires is not None and expires <= now:
        parsed.skipped.append(Skipped(where, f"expired at {expires.isoformat()}"))
        return
    extra: dict[str, Any] = {}
    for name, expected in CARRIED.items():
        value = item.get(name)
        if value is None:
            continue
        if not isinstance(value, expected) or (expected is not bool and isinstance(value, bool)):
            raise ImportFormatError(f"{where}: {name!r} has the wrong type ({type(value).__name__})")
        extra[name] = value
    if expires is not None:
        extra["expiresAt"] = expires
    session = optional_text(item, "sessionId", where)
    if session:
        extra.update(scope="session", sessionId=session)
    metadata = item.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ImportFormatError(f"{where}: 'metadata' must be an object")
    ids[fid] = True
    parsed.records.append(
        ImportRecord(
            key=fid,
            where=where,
            # a memory cut at 300 characters carries its whole text as detail: import the whole
            content=optional_text(item, "detail", where) or text_field(item, "content", where),
            topic=text_field(item, "topic", where),
            type=type_,
            source=optional_text(item, "source", where),
            keywords=tuple(string_list(item.get("keywords"), where, "keywords")),
            tags=tuple(string_list(item.get("tags"), where, "tags")),
            created_at=parse_time(item.get("createdAt"), where, "createdAt"),
            metadata=metadata,
            context=optional_text(item, "context", where),
            extra=extra,
            agent=agent,
            keep_id=fid,
        )
    )


def _link(parsed: Parsed, ids: dict[str, bool], item: dict[str, Any], where: str) -> None:
    agent = text_field(item, "agentId", where)
    source, target = text_field(item, "from", where), text_field(item, "to", where)
    raw = text_field(item, "relation", where)
    try:
        relation = RelationType(raw)
    except ValueError:
        raise ImportFormatError(f"{where}: unknown relation {raw!r}") from None
    missing = [i for i in (source, target) if not ids.get(i)]
    if missing:
        parsed.skipped.append(Skipped(where, f"link to a fragment not in the file (skipped or not exported): {', '.join(missing)}"))
        return
    parsed.links.append(ImportLink(source, target, relation, where, agent))


def _number(item: dict[str, Any], name: str, where: str, default: float) -> float:
    value = item.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ImportFormatError(f"{where}: {name!r} must be a number")
    return float(value)


def _object(item: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    value = item.get(name) or {}
    if not isinstance(value, dict):
        raise ImportFormatError(f"{where}: {name!r} must be an object")
    return value


def _entity(parsed: Parsed, ids: dict[str, bool], item: dict[str, Any], where: str) -> None:
    parsed.entities.append(
        ImportEntity(
            name=text_field(item, "name", where),
            entity_type=text_field(item, "entityType", where),
            where=where,
            description=optional_text(item, "description", where),
            metadata=_object(item, "metadata", where),
            agent=text_field(item, "agentId", where),
        )
    )


def _relation(parsed: Parsed, ids: dict[str, bool], item: dict[str, Any], where: str) -> None:
    parsed.relations.append(
        ImportRelation(
            source=text_field(item, "source", where),
            target=text_field(item, "target", where),
            relation_type=text_field(item, "relationType", where),
            where=where,
            strength=_number(item, "strength", where, 0.5),
            confidence=_number(item, "confidence", where, 1.0),
            context=optional_text(item, "context", where),
            metadata=_object(item, "metadata", where),
            agent=text_field(item, "agentId", where),
        )
    )


def _entity_link(parsed: Parsed, ids: dict[str, bool], item: dict[str, Any], where: str) -> None:
    fragment = text_field(item, "fragment", where)
    if fragment not in ids:
        raise ImportFormatError(f"{where}: entity link to fragment {fragment!r}, which is not in the export")
    if not ids[fragment]:  # its memory was left out (expired): so is the association
        parsed.skipped.append(Skipped(where, f"association with {fragment}, which is not imported"))
        return
    parsed.entity_links.append(
        ImportEntityLink(
            entity=text_field(item, "entity", where),
            record_key=fragment,
            relevance=_number(item, "relevance", where, 1.0),
            where=where,
            agent=text_field(item, "agentId", where),
        )
    )


GRAPH_KINDS = {"entity": _entity, "relation": _relation, "entityLink": _entity_link}
