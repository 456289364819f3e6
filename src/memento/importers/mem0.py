"""mem0 memories as `get_all` returns them (the open-source `Memory` and the platform client) and
as people save them: a JSON array of memories, or an object holding them under `results` (also
the paginated `{count, next, previous, results}`) or `memories`.

A memory: `{"id", "memory", "hash", "metadata", "categories", "created_at", "updated_at",
"user_id", "agent_id", "app_id", "run_id", "actor_id", "role", "immutable", "expiration_date"}`,
only `memory` required.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..models import FragmentType
from .records import ImportFormatError, ImportRecord, Parsed, Skipped, chunked, optional_text, parse_time, string_list, text_field

FORMAT = "mem0"
SOURCE = "import:mem0"
PREFERENCE_CATEGORIES = frozenset({"user_preferences", "preferences", "preference"})
SCOPES = ("user_id", "agent_id", "app_id", "run_id")
PROVENANCE = ("id", "hash", "user_id", "agent_id", "app_id", "run_id", "actor_id", "role", "updated_at")


def memories_of(document: Any, path: Path) -> list[Any]:
    """The list of memories in a parsed mem0 document, or a format error."""
    if isinstance(document, list):
        return document
    if isinstance(document, dict):
        for key in ("results", "memories"):
            if isinstance(document.get(key), list):
                return list(document[key])
    raise ImportFormatError(f"{path}: expected a JSON array of mem0 memories or an object with 'results' or 'memories'")


def read(path: Path, now: datetime | None = None) -> Parsed:
    """Parse a mem0 export; a malformed memory is an error naming its position."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ImportFormatError(f"{path}:{exc.lineno}: not JSON ({exc.msg})") from None
    parsed = Parsed(FORMAT)
    moment = now or datetime.now(UTC)
    for index, item in enumerate(memories_of(document, path), start=1):
        where = f"{path}#memory {index}"
        if not isinstance(item, dict):
            raise ImportFormatError(f"{where}: expected a JSON object")
        record = _record(item, where, index, moment, parsed)
        if record is not None:
            records, links = chunked(record)
            parsed.records += records
            parsed.links += links
    return parsed


def _record(item: dict[str, Any], where: str, index: int, now: datetime, parsed: Parsed) -> ImportRecord | None:
    text = text_field(item, "memory", where)
    if not text.strip():
        parsed.skipped.append(Skipped(where, "empty memory"))
        return None
    categories = [c.strip() for c in string_list(item.get("categories"), where, "categories") if c.strip()]
    metadata = item.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise ImportFormatError(f"{where}: 'metadata' must be an object")
    for name in (*SCOPES, "id", "hash"):
        optional_text(item, name, where)
    created = parse_time(item.get("created_at"), where, "created_at")
    parse_time(item.get("updated_at"), where, "updated_at")
    expires = parse_time(item.get("expiration_date"), where, "expiration_date")
    if expires is not None and expires <= now:
        parsed.skipped.append(Skipped(where, f"expired on {expires.date().isoformat()}"))
        return None
    immutable = item.get("immutable", False)
    if not isinstance(immutable, bool):
        raise ImportFormatError(f"{where}: 'immutable' must be true or false")
    extra: dict[str, Any] = {"pinned": True} if immutable else {}
    if expires is not None:
        extra["expiresAt"] = expires
    provenance = {k: item[k] for k in PROVENANCE if item.get(k) is not None}
    if categories:
        provenance["categories"] = categories
    return ImportRecord(
        key=f"memory:{item.get('id') or index}",
        where=where,
        content=text,
        topic=categories[0] if categories else "mem0",
        type=_type(categories, metadata or {}),
        source=SOURCE,
        tags=tuple(categories) + tuple(f"{k.removesuffix('_id')}:{item[k]}" for k in SCOPES if item.get(k)),
        created_at=created,
        metadata={**(metadata or {}), "mem0": provenance},
        extra=extra,
    )


def _type(categories: list[str], metadata: dict[str, Any]) -> FragmentType:
    """mem0's procedural memories are procedures, a preference category a preference, the rest facts."""
    if str(metadata.get("memory_type", "")).startswith("procedural"):
        return FragmentType.PROCEDURE
    if PREFERENCE_CATEGORIES & {c.lower() for c in categories}:
        return FragmentType.PREFERENCE
    return FragmentType.FACT
