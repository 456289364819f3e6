"""The readable export formats: Markdown (one file with a heading per memory, or one note per memory
with YAML front matter) and CSV (one row per memory, a fixed column set). docs/export.md."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import datetime
from typing import Any

from .wire import timestamp

# The CSV columns, in order (docs/export.md): a memory's fields by their wire names.
CSV_COLUMNS: tuple[str, ...] = (
    "id",
    "agentId",
    "sessionId",
    "type",
    "topic",
    "content",
    "detail",
    "tags",
    "keywords",
    "importance",
    "confidence",
    "pinned",
    "isAnchor",
    "memorySystem",
    "privacyScope",
    "ttlTier",
    "source",
    "context",
    "metadata",
    "createdAt",
    "accessedAt",
    "accessCount",
    "expiresAt",
    "deletedAt",
    "memoryKey",
)
LIST_SEPARATOR = ";"  # tags and keywords in one CSV cell
_SOURCE = {
    "agentId": "agent_id",
    "sessionId": "session_id",
    "isAnchor": "is_anchor",
    "memorySystem": "memory_system",
    "privacyScope": "privacy_scope",
    "ttlTier": "ttl_tier",
    "createdAt": "created_at",
    "accessedAt": "accessed_at",
    "accessCount": "access_count",
    "expiresAt": "expires_at",
    "deletedAt": "deleted_at",
    "memoryKey": "memory_key",
}


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return timestamp(value)
    if isinstance(value, list):
        return LIST_SEPARATOR.join(str(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


class CsvLines:
    """CSV lines one at a time (RFC 4180 quoting by the csv module, CRLF line ends)."""

    def __init__(self) -> None:
        self._buffer = io.StringIO()
        self._writer = csv.writer(self._buffer, lineterminator="\r\n")

    def line(self, cells: list[str]) -> str:
        self._buffer.seek(0)
        self._buffer.truncate()
        self._writer.writerow(cells)
        return self._buffer.getvalue()

    def header(self) -> str:
        return self.line(list(CSV_COLUMNS))

    def row(self, row: dict[str, object]) -> str:
        """One memory as a CSV line."""
        return self.line([_cell(row.get(_SOURCE.get(c, c))) for c in CSV_COLUMNS])


# ---------------------------------------------------------------- Markdown

_HEADING = re.compile(r"^(#{1,6})(\s)", re.MULTILINE)


def _text(row: dict[str, object]) -> str:
    """The memory's whole text (its detail when the content was cut)."""
    return str(row.get("detail") or row.get("content") or "")


def _title(row: dict[str, object], width: int = 72) -> str:
    first = " ".join(_text(row).split())
    return first if len(first) <= width else first[: width - 1].rstrip() + "…"


def markdown_title(agents: list[str], now: datetime) -> str:
    listed = ", ".join(agents) if agents else "none"
    return f"# Memento export\n\nExported {timestamp(now)} · agents: {listed}\n\n"


def markdown_section(row: dict[str, object]) -> str:
    """One memory under its own heading: a line of its fields, then its text (a line of the text
    that would read as a heading is escaped, so every heading is a memory's)."""
    facts = [f"`{row['id']}`", str(row["type"]), str(row["memory_system"]), f"importance {row['importance']}"]
    if row.get("pinned"):
        facts.append("pinned")
    if row.get("tags"):
        facts.append("tags: " + ", ".join(str(t) for t in row["tags"]))  # type: ignore[attr-defined]
    facts.append(f"agent {row['agent_id']}")
    facts.append(f"created {timestamp(row['created_at'])}")  # type: ignore[arg-type]
    if row.get("deleted_at"):
        facts.append(f"forgotten {timestamp(row['deleted_at'])}")  # type: ignore[arg-type]
    body = _HEADING.sub(r"\\\1\2", _text(row))
    return f"## {row['topic']}: {_title(row)}\n\n{' · '.join(facts)}\n\n{body}\n\n"


def front_matter(row: dict[str, object]) -> dict[str, Any]:
    """The YAML front matter of a memory's note: what basic-memory reads (title, type, tags,
    created, permalink) and the rest of its record by wire name."""
    out: dict[str, Any] = {
        "id": row["id"],
        "title": row["topic"],
        "type": row["type"],
        "topic": row["topic"],
        "tags": list(row.get("tags") or []),  # type: ignore[call-overload]
        "created": timestamp(row["created_at"]),  # type: ignore[arg-type]
        "createdAt": timestamp(row["created_at"]),  # type: ignore[arg-type]
        "permalink": row["id"],
        "agentId": row["agent_id"],
        "importance": row["importance"],
        "confidence": row["confidence"],
        "pinned": bool(row.get("pinned")),
        "memorySystem": row["memory_system"],
        "privacyScope": row["privacy_scope"],
    }
    for wire, column in (("source", "source"), ("sessionId", "session_id"), ("memoryKey", "memory_key"), ("context", "context")):
        if row.get(column) is not None:
            out[wire] = row[column]
    for wire, column in (("expiresAt", "expires_at"), ("deletedAt", "deleted_at")):
        if row.get(column) is not None:
            out[wire] = timestamp(row[column])  # type: ignore[arg-type]
    if row.get("metadata"):
        out["metadata"] = row["metadata"]
    return out


def markdown_note(row: dict[str, object]) -> str:
    """One memory as a Markdown note: YAML front matter, a heading, its text."""
    import yaml  # on first use: the export tool is served on every start, Markdown exports are rare

    front = yaml.safe_dump(front_matter(row), allow_unicode=True, sort_keys=False, default_flow_style=False)
    return f"---\n{front}---\n\n# {row['topic']}\n\n{_text(row)}\n"


def note_name(row: dict[str, object]) -> str:
    """The file name of a memory's note: its id (unique, and safe in a path)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", str(row["id"])) + ".md"
