"""mcp-memory-service's SQLite-vec database (doobidoo/mcp-memory-service): the `memories` table
(content, content_hash, tags as comma-separated text, memory_type, metadata as JSON text,
created_at epoch seconds and created_at_iso, deleted_at for soft-deleted rows) and, when present,
the `memory_graph` edges between content hashes (relationship_type related, causes, fixes,
supports, follows, contradicts). The database is opened read-only; its vector table is not read.

Each live row becomes a memory (longer content in part_of pieces) typed by the service's
ontology (a subtype by its base type), its first tag as topic; each edge a link.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pysqlite3.dbapi2 as sqlite3

from ..models import FragmentType
from .records import ImportFormatError, ImportRecord, Parsed, Skipped, chunked, parse_time, relation_link

FORMAT = "mcp-memory-service"
SOURCE = "import:mcp-memory-service"
SQLITE_MAGIC = b"SQLite format 3\x00"
COLUMNS = (
    "id",
    "content_hash",
    "content",
    "tags",
    "memory_type",
    "metadata",
    "created_at",
    "created_at_iso",
    "updated_at_iso",
    "deleted_at",
)

# The service's ontology: base types and their subtypes, plus the names older versions used.
ONTOLOGY: dict[FragmentType, tuple[str, ...]] = {
    FragmentType.OBSERVATION: ("observation", "code_edit", "file_access", "search", "command", "conversation"),
    FragmentType.DECISION: ("decision", "architecture", "tool_choice", "approach", "configuration"),
    FragmentType.LEARNING: ("learning", "insight", "best_practice", "anti_pattern", "gotcha"),
    FragmentType.ERROR: ("error", "bug", "failure", "exception", "timeout"),
    FragmentType.PATTERN: ("pattern", "recurring_issue", "code_smell", "design_pattern", "workflow"),
    FragmentType.PREFERENCE: ("preference", "preferences"),
    FragmentType.PROCEDURE: ("procedure", "howto", "how_to", "instruction"),
    FragmentType.EPISODE: ("session", "session_summary", "episode", "event", "meeting"),
}
_TYPE_OF = {name: type_ for type_, names in ONTOLOGY.items() for name in names}


def memory_type(name: str | None) -> FragmentType:
    """Memento's type for a memory_type of the service (notes, references and unknown names: fact)."""
    return _TYPE_OF.get((name or "").strip().lower().replace("-", "_"), FragmentType.FACT)


def is_database(path: Path) -> bool:
    """Whether `path` is an SQLite file (the format's container)."""
    try:
        with path.open("rb") as handle:
            return handle.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def read(path: Path) -> Parsed:
    """Parse an mcp-memory-service database; a malformed row is an error naming its id."""
    if not is_database(path):
        raise ImportFormatError(f"{path}: not an SQLite database")
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        columns = {r["name"] for r in conn.execute("PRAGMA table_info(memories)")}
        if not {"content", "content_hash"} <= columns:
            raise ImportFormatError(f"{path}: not an mcp-memory-service database (no memories table with content and content_hash)")
        wanted = [c for c in COLUMNS if c in columns]
        rows = conn.execute(f"SELECT {', '.join(wanted)} FROM memories ORDER BY rowid").fetchall()
        graph = _edges(conn)
    except sqlite3.DatabaseError as exc:
        raise ImportFormatError(f"{path}: cannot read the database ({exc})") from None
    finally:
        conn.close()
    parsed = Parsed(FORMAT)
    keys: dict[str, str] = {}
    for row in rows:
        _row(parsed, keys, dict(row), path)
    for number, (source, target, label) in enumerate(graph, start=1):
        where = f"{path}#memory_graph row {number}"
        if source not in keys or target not in keys:
            parsed.skipped.append(Skipped(where, "edge to a memory that is deleted or absent"))
        elif source != target:
            parsed.links.append(relation_link(keys[source], keys[target], label, where))
    return parsed


def _edges(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    columns = {r["name"] for r in conn.execute("PRAGMA table_info(memory_graph)")}
    if not {"source_hash", "target_hash"} <= columns:
        return []
    label = "relationship_type" if "relationship_type" in columns else "'related'"
    rows = conn.execute(f"SELECT source_hash, target_hash, COALESCE({label}, 'related') FROM memory_graph ORDER BY rowid").fetchall()
    return [(str(a), str(b), str(c)) for a, b, c in rows]


def _row(parsed: Parsed, keys: dict[str, str], row: dict[str, Any], path: Path) -> None:
    where = f"{path}#memories id={row.get('id', '?')}"
    digest, content = row.get("content_hash"), row.get("content")
    if not isinstance(digest, str) or not digest or not isinstance(content, str):
        raise ImportFormatError(f"{where}: content and content_hash must be text")
    if row.get("deleted_at") is not None:
        parsed.skipped.append(Skipped(where, "deleted in mcp-memory-service"))
        return
    if not content.strip():
        parsed.skipped.append(Skipped(where, "empty content"))
        return
    tags = _tags(row.get("tags"), where)
    metadata = _metadata(row.get("metadata"), where)
    created = parse_time(row.get("created_at"), where, "created_at") or parse_time(row.get("created_at_iso"), where, "created_at_iso")
    kind = row.get("memory_type") if isinstance(row.get("memory_type"), str) else None
    provenance = {"contentHash": digest} | ({"memoryType": kind} if kind else {})
    if row.get("updated_at_iso"):
        provenance["updatedAt"] = str(row["updated_at_iso"])
    key = f"hash:{digest}"
    if digest in keys:
        raise ImportFormatError(f"{where}: content_hash {digest} appears twice")
    keys[digest] = key
    record = ImportRecord(
        key=key,
        where=where,
        content=content,
        topic=tags[0] if tags else "mcp-memory-service",
        type=memory_type(kind),
        source=SOURCE,
        tags=tuple(tags),
        created_at=created,
        metadata={**metadata, "mcpMemoryService": provenance},
    )
    records, links = chunked(record)
    parsed.records += records
    parsed.links += links


def _tags(value: Any, where: str) -> list[str]:
    """Comma-separated tags (the service's storage), or a JSON list (older exports)."""
    if value is None or value == "":
        return []
    if not isinstance(value, str):
        raise ImportFormatError(f"{where}: tags must be text")
    if value.lstrip().startswith("["):
        try:
            items = json.loads(value)
        except json.JSONDecodeError:
            raise ImportFormatError(f"{where}: tags look like JSON but do not parse") from None
        if not isinstance(items, list):
            raise ImportFormatError(f"{where}: tags must be a list")
        return [str(t).strip() for t in items if str(t).strip()]
    return [t.strip() for t in value.split(",") if t.strip()]


def _metadata(value: Any, where: str) -> dict[str, Any]:
    if value is None or value == "":
        return {}
    try:
        found = json.loads(value) if isinstance(value, str) else None
    except json.JSONDecodeError:
        raise ImportFormatError(f"{where}: metadata is not JSON") from None
    if not isinstance(found, dict):
        raise ImportFormatError(f"{where}: metadata must be a JSON object")
    return found
