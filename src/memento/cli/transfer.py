"""`memento import`: bring memories in from Memento's own export and from the stores people
leave (docs/import.md)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, TextIO

from ..app import build_app
from ..errors import InvalidArgument
from ..importers import FORMATS, ImportReport, import_path
from ..settings import Settings

COMMANDS = ("import",)


def register(sub: Any) -> None:
    """Add `import` to the `memento` parser's subparsers."""
    imp = sub.add_parser("import", help="import memories from an export or another memory tool (docs/import.md)")
    imp.add_argument("path", type=Path, help="a file, or a basic-memory folder")
    imp.add_argument("--format", dest="fmt", choices=["auto", *FORMATS], default="auto", help="the input's format (default: detected)")
    imp.add_argument("--agent", dest="agent_id", help="the namespace to import into (default: the export's agents, else 'default')")
    imp.add_argument("--dry-run", action="store_true", help="parse and validate only; store nothing")
    imp.add_argument("--json", action="store_true", help="print the report as JSON")
    imp.add_argument(
        "--defer-embedding",
        action="store_true",
        help="Memento's export: store memories the file carries no vector for without one; the server's embedding worker embeds them",
    )
    imp.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    imp.add_argument(
        "--rebuild-vector-index",
        action="store_true",
        help="PostgreSQL, a large import: drop the HNSW vector index before it and build it again after, even if the import"
        " fails (needs the table owner: DATABASE_MIGRATION_URL); meanwhile vector search scans exactly (docs/import.md)",
    )
    imp.add_argument(
        "--index-memory", type=int, metavar="MB", help="with --rebuild-vector-index: maintenance_work_mem of the build (default: estimated)"
    )


class RateProgress:
    """Progress lines for a long import: count, share, rate and the time left. On a terminal one
    line rewritten in place; otherwise (a log, a pipe) a line every `every_s` seconds and at each
    tenth of the way, so a million-memory import reports without flooding its log."""

    def __init__(self, stream: TextIO, *, every_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.every_s = every_s
        self.clock = clock
        self.tty = stream.isatty()
        self.started: float | None = None
        self.first = 0
        self.shown_at = 0.0
        self.tenth = -1

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if self.started is None:
            self.started, self.first, self.shown_at = now, done, now
        finished = done >= total
        tenth = 10 * done // total if total else 10
        if not (self.tty or finished or tenth > self.tenth or now - self.shown_at >= self.every_s):
            return
        self.tenth, self.shown_at = max(self.tenth, tenth), now
        self.stream.write(
            ("\r" if self.tty else "") + self.line(done, total, now - self.started) + ("\n" if finished or not self.tty else "")
        )
        self.stream.flush()

    def line(self, done: int, total: int, elapsed: float) -> str:
        share = f" ({100 * done / total:.0f}%)" if total else ""
        rate = (done - self.first) / elapsed if elapsed > 0 else 0.0
        left = f", {_duration((total - done) / rate)} left" if rate > 0 and done < total else ""
        return f"imported {done:,}/{total:,} memories{share}, {rate:,.0f}/s, {_duration(elapsed)} elapsed{left}"


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"


def run(args: argparse.Namespace, settings: Settings) -> int:
    app = build_app(settings)
    try:
        progress = None if args.dry_run or args.no_progress else RateProgress(sys.stderr)
        with _vector_index(args, settings):
            report = import_path(
                app.service,
                args.path,
                fmt=args.fmt,
                agent=args.agent_id,
                dry=args.dry_run,
                progress=progress,
                defer_embedding=args.defer_embedding,
            )
    finally:
        app.close()
    if args.json:
        print(json.dumps(report.as_dict(), ensure_ascii=False, indent=2))
    else:
        print(describe(report))
    return 0


def _vector_index(args: argparse.Namespace, settings: Settings) -> AbstractContextManager[None]:
    """--rebuild-vector-index: the HNSW index set aside for the import and built again after it."""
    if not args.rebuild_vector_index:
        if args.index_memory is not None:
            raise InvalidArgument("--index-memory goes with --rebuild-vector-index; nothing imported")
        return nullcontext()
    if settings.backend != "postgres":
        raise InvalidArgument(
            "--rebuild-vector-index applies to PostgreSQL (SQLite builds its vector index when first used); nothing imported"
        )
    if args.index_memory is not None and args.index_memory < 1:
        raise InvalidArgument("--index-memory is a size in MB, at least 1; nothing imported")
    if args.dry_run:
        return nullcontext()

    def report(line: str) -> None:
        if not args.no_progress:
            print(line, file=sys.stderr, flush=True)

    from ..storage import postgres_vector_index as vector_index  # psycopg: the optional postgres extra

    return vector_index.paused(settings.database_migration_url or settings.postgres_dsn, report, memory=args.index_memory)


def describe(report: ImportReport) -> str:
    """The report for a person: one line of counts, then each skipped item and why."""
    if report.dry_run:
        head = (
            f"dry run ({report.format}): {report.read} read, {report.memories} memories and {len(report.skipped)} skipped; nothing stored"
        )
    else:
        head = (
            f"imported {report.source} ({report.format}): {report.read} read, {report.stored} stored, "
            f"{report.already_known} already known, {report.links} links added ({report.links_known} already there), "
            f"{len(report.skipped)} skipped"
        )
    agents = ", ".join(f"{agent}: {count}" for agent, count in sorted(report.agents.items()))
    lines = [head, f"agents: {agents}" if agents else "agents: none"]
    if report.vectors:
        kept, embedded, pending = (report.vectors.get(k, 0) for k in ("kept", "embedded", "pending"))
        lines.append(f"vectors: {kept} kept from the file, {embedded} embedded, {pending} left to the embedding worker")
    lines += [f"skipped {s.where}: {s.reason}" for s in report.skipped]
    return "\n".join(lines)
