"""`memento export`: the memories of the chosen agents (every agent by default) in the memento
export format version 2 (lossless NDJSON; `memento import` reads it), Markdown or CSV
(docs/export.md).

The records are read a page at a time through the store protocol and written as they come
(memento.exchange.export), so memory does not grow with the store. A file target is written
beside itself under a temporary name and renamed when complete: it never holds half an export.
A Markdown folder (one note per memory) is built the same way, as a temporary folder.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO

from ..errors import Conflict, InvalidArgument, NotFound
from ..exchange import formats
from ..exchange.export import Exporter, Format, Progress
from ..models import MAINTENANCE_AGENTS, AgentScope
from ..storage.protocol import AppStore, SearchFilter
from ..storage.records import RecordQuery

MAINTENANCE_SCOPE = "system"  # sees every namespace (models.MAINTENANCE_AGENTS)


@dataclass(frozen=True)
class ExportReport:
    """What an export wrote."""

    path: str  # "-" for stdout
    agents: list[str]
    fragments: int
    links: int
    entities: int = 0
    format: str = "ndjson"
    counts: dict[str, int] = field(default_factory=dict)  # every kind written

    def as_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "format": self.format,
            "agents": self.agents,
            "fragments": self.fragments,
            "links": self.links,
            "entities": self.entities,
            "counts": self.counts,
        }


def exporter(
    store: AppStore,
    fmt: Format,
    *,
    agents: list[str] | None = None,
    include_sessions: bool = False,
    include_forgotten: bool = False,
    page: int | None = None,
    vectors: bool = False,
) -> Exporter:
    """The export of `agents` (None: every agent), read in the maintenance scope; `vectors`: each
    memory's stored vector too (NDJSON)."""
    if agents is not None:
        reserved = sorted(set(agents) & MAINTENANCE_AGENTS)
        if reserved:
            raise InvalidArgument(f"{', '.join(reserved)} is the maintenance scope, not an agent; omit --agent to export every agent")
    query = RecordQuery(
        SearchFilter(all_sessions=include_sessions),
        include_forgotten=include_forgotten,
        agents=None if agents is None else tuple(dict.fromkeys(agents)),
        vectors=vectors,
    )
    extra = {} if page is None else {"page": page}
    return Exporter(store, AgentScope(MAINTENANCE_SCOPE), query, fmt, **extra)


def export(
    store: AppStore,
    out: IO[str],
    *,
    fmt: Format = "ndjson",
    agents: list[str] | None = None,
    include_sessions: bool = False,
    include_forgotten: bool = False,
    progress: Progress | None = None,
    now: datetime | None = None,
    vectors: bool = False,
) -> ExportReport:
    """Write the export to `out` as it is read."""
    store.flush_access()  # settled access counts, as the views show them
    job = exporter(store, fmt, agents=agents, include_sessions=include_sessions, include_forgotten=include_forgotten, vectors=vectors)
    for piece in job.stream(progress=progress, now=now):
        out.write(piece)
    out.flush()
    return _report("-", job, job.listed)


def _report(path: str, job: Exporter, listed: list[str]) -> ExportReport:
    c = job.counts
    return ExportReport(path, listed, c.of("fragment"), c.of("link"), c.of("entity"), job.fmt, dict(sorted(c.by_kind.items())))


def export_notes(
    store: AppStore,
    folder: Path,
    *,
    agents: list[str] | None = None,
    include_sessions: bool = False,
    include_forgotten: bool = False,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> ExportReport:
    """One Markdown note per memory (YAML front matter, then its text) in `folder`, created whole:
    built as a temporary folder beside it and renamed into place."""
    if folder.exists() and not folder.is_dir():
        raise InvalidArgument(f"{folder} is a file; give a folder for the notes")
    if folder.exists() and any(folder.iterdir()) and not overwrite:
        raise Conflict(f"{folder} is not empty; nothing written (--force replaces it)")
    if not folder.parent.is_dir():
        raise NotFound(f"folder {folder.parent} does not exist")
    store.flush_access()
    job = exporter(store, "markdown", agents=agents, include_sessions=include_sessions, include_forgotten=include_forgotten)
    owners = job.owners()
    tmp = folder.with_name(f".{folder.name}.{secrets.token_hex(6)}.partial")
    tmp.mkdir()
    try:
        written = 0
        for spec in job.tables:  # the memories only
            after = 0
            while rows := store.record_page(job.scope, spec.table, job.query, after, job.page):
                for row in rows:
                    (tmp / formats.note_name(row)).write_text(formats.markdown_note(row), encoding="utf-8", newline="\n")
                    after = int(row["_key"])  # type: ignore[call-overload]
                written += len(rows)
                job.counts.add(spec.kind, len(rows))
                if progress is not None:
                    progress(written, max(sum(owners.values()), written))
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return _report(str(folder), job, job.agents(owners))


def export_to_file(target: Path, write: Callable[[IO[str]], ExportReport], *, overwrite: bool = False) -> ExportReport:
    """Run `write` into a temporary file beside `target` and move it into place when complete:
    `target` never holds half an export. Refuses an existing `target` unless `overwrite`."""
    if target.is_dir():
        raise InvalidArgument(f"{target} is a directory; give a file name")
    if not target.parent.is_dir():
        raise NotFound(f"folder {target.parent} does not exist")
    if target.exists() and not overwrite:
        raise Conflict(f"{target} already exists; nothing written (--force replaces it)")
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.partial")
    try:
        # CSV rows end in CRLF (RFC 4180) themselves: no newline translation
        with tmp.open("w", encoding="utf-8", newline="") as f:
            report = write(f)
            f.flush()
            os.fsync(f.fileno())
        if overwrite:
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)  # refuses an existing name: no check-then-write race
            except FileExistsError as exc:
                raise Conflict(f"{target} already exists; nothing written (--force replaces it)") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return ExportReport(str(target), report.agents, report.fragments, report.links, report.entities, report.format, report.counts)
