"""Streaming export: an agent's records read a page at a time through the RecordStore protocol and
written as they come (NDJSON version 2, Markdown, CSV), in memory that does not grow with the
store. docs/export.md.

NDJSON: a header line (the agents, counted up front by one query), the fragments (each with its
version trail), the links, the entity graph, and a trailer line with the count of every kind
(an importer refuses a file without it: the export was cut short). Markdown and CSV carry the
memories only. A `Position` marks where a stream stopped, so a page-at-a-time reader (the MCP
tool) resumes there.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from .. import __version__
from ..errors import InvalidArgument
from ..models import AgentScope
from ..storage.protocol import RecordStore
from ..storage.records import FRAGMENTS, RECORD_TABLES, RecordQuery, RecordTable
from . import formats, wire

Format = Literal["ndjson", "markdown", "csv"]
FORMATS: tuple[Format, ...] = ("ndjson", "markdown", "csv")
PAGE = 500  # rows read per store call
Progress = Callable[[int, int], None]  # (memories written, memories in all)


@dataclass(frozen=True)
class Position:
    """Where a stream stands: the table being read (its index among the format's tables), the
    paging key of the last row written, and what was written before it (the trailer counts it)."""

    phase: int = 0
    after: int = 0
    counts: tuple[tuple[str, int], ...] = ()

    def token(self, fmt: Format) -> str:
        """An opaque cursor for the next page."""
        raw = json.dumps([fmt, self.phase, self.after, dict(self.counts)], separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")

    @classmethod
    def parse(cls, token: str, fmt: Format) -> Position:
        """The position of a cursor; InvalidArgument for one this server did not give for `fmt`."""
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            kind, phase, after, counts = json.loads(raw)
        except (binascii.Error, ValueError, TypeError):
            raise InvalidArgument("cursor: not a cursor this server gave; start again without one") from None
        fine = isinstance(phase, int) and isinstance(after, int) and phase >= 0 and after >= 0 and isinstance(counts, dict)
        if kind != fmt or not fine or not all(isinstance(k, str) and isinstance(v, int) for k, v in counts.items()):
            raise InvalidArgument(f"cursor: not a cursor of a {fmt} export; start again without one")
        return cls(phase, after, tuple(sorted(counts.items())))


@dataclass
class Counts:
    """What an export wrote, by kind (`versions` counts version rows inside fragments)."""

    by_kind: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str, n: int = 1) -> None:
        self.by_kind[kind] = self.by_kind.get(kind, 0) + n

    def of(self, kind: str) -> int:
        return self.by_kind.get(kind, 0)


class Exporter:
    """One export of `scope`'s records that `query` selects, in format `fmt`."""

    def __init__(self, store: RecordStore, scope: AgentScope, query: RecordQuery, fmt: Format, *, page: int = PAGE) -> None:
        if fmt not in FORMATS:
            raise InvalidArgument(f"format: expected one of {', '.join(FORMATS)}, not {fmt!r}")
        self.store = store
        self.scope = scope
        self.query = query
        self.fmt = fmt
        self.page = page
        self.counts = Counts()
        self.listed: list[str] = []  # the agents the header named (set by `stream`)
        self._csv = formats.CsvLines()
        # NDJSON carries every table (nested ones inside their fragments); the readable formats the memories
        self.tables: tuple[RecordTable, ...] = tuple(t for t in RECORD_TABLES if not t.nested) if fmt == "ndjson" else (FRAGMENTS,)

    def owners(self) -> dict[str, int]:
        """Each exported agent and its number of memories (one count query, before any row is read)."""
        return self.store.record_owners(self.scope, self.query)

    def agents(self, owners: dict[str, int]) -> list[str]:
        """The agents the header names: those asked for, else those that have exported memories."""
        if self.query.agents is not None:
            return list(dict.fromkeys(self.query.agents))
        return sorted(owners) if self.scope.is_maintenance else [self.scope.agent_id]

    def head(self, agents: list[str], total: int, now: datetime) -> str:
        """What opens the export: the NDJSON header, the Markdown title, the CSV header row."""
        if self.fmt == "ndjson":
            header = {
                "format": wire.FORMAT,
                "version": wire.VERSION,
                "exportedAt": wire.timestamp(now),
                "memento": __version__,
                "agents": agents,
                "fragments": total,
                "includesForgotten": self.query.include_forgotten,
            }
            return wire.line(header)
        if self.fmt == "markdown":
            return formats.markdown_title(agents, now)
        return self._csv.header()

    def body(self, start: Position = Position()) -> Iterator[tuple[str, Position]]:
        """Each record's text from `start` on (the counts go on from its), with the position after it."""
        self.counts = Counts(dict(start.counts))
        for phase in range(start.phase, len(self.tables)):
            spec = self.tables[phase]
            after = start.after if phase == start.phase else 0
            while True:
                rows = self.store.record_page(self.scope, spec.table, self.query, after, self.page)
                for row in rows:
                    after = int(row["_key"])  # type: ignore[call-overload]
                    text = self._render(spec, row)
                    yield text, Position(phase, after, tuple(sorted(self.counts.by_kind.items())))
                if len(rows) < self.page:
                    break

    def _render(self, spec: RecordTable, row: dict[str, object]) -> str:
        self.counts.add(spec.kind)
        if spec is FRAGMENTS:
            for child in (t for t in RECORD_TABLES if t.nested):
                self.counts.add(child.kind, len(row.get(child.kind) or []))  # type: ignore[arg-type]
        if self.fmt == "ndjson":
            line = wire.encode(spec, row)
            vector = row.get("embedding") if spec is FRAGMENTS else None
            if vector is not None:  # asked for (RecordQuery.vectors): an import of the same model keeps it
                line.update(wire.vector_fields(vector, str(row["embedding_model"])))  # type: ignore[arg-type]
            return wire.line(line)
        if self.fmt == "markdown":
            return formats.markdown_section(row)
        return self._csv.row(row)

    def tail(self) -> str:
        """What closes the export: the NDJSON trailer with every count (nothing for the others)."""
        if self.fmt != "ndjson":
            return ""
        return wire.line({"kind": wire.END, "counts": dict(sorted(self.counts.by_kind.items()))})

    def stream(self, *, progress: Progress | None = None, now: datetime | None = None) -> Iterator[str]:
        """The whole export, piece by piece; `progress` after every page of memories."""
        owners = self.owners()
        total = sum(owners.values())
        self.listed = self.agents(owners)
        yield self.head(self.listed, total, now or datetime.now(UTC))
        written = 0
        for text, position in self.body():
            yield text
            if progress is not None and position.phase == 0:
                written += 1
                if written % self.page == 0:
                    progress(written, max(total, written))
        if progress is not None:
            progress(self.counts.of(FRAGMENTS.kind), self.counts.of(FRAGMENTS.kind))
        yield self.tail()
