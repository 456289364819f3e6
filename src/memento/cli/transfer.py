"""`memento import`: bring memories in from Memento's own export and from the stores people
leave (docs/import.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from ..app import build_app
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


class BarProgress:
    """A one-line progress bar on a terminal stream."""

    def __init__(self, stream: TextIO, width: int = 30) -> None:
        self.stream = stream
        self.width = width

    def __call__(self, done: int, total: int) -> None:
        filled = self.width if total == 0 else done * self.width // total
        self.stream.write(f"\rimporting [{'#' * filled}{'-' * (self.width - filled)}] {done}/{total}")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


def run(args: argparse.Namespace, settings: Settings) -> int:
    app = build_app(settings)
    try:
        progress = BarProgress(sys.stderr) if sys.stderr.isatty() and not args.dry_run else None
        report = import_path(app.service, args.path, fmt=args.fmt, agent=args.agent_id, dry=args.dry_run, progress=progress)
    finally:
        app.close()
    if args.json:
        print(json.dumps(report.as_dict(), ensure_ascii=False, indent=2))
    else:
        print(describe(report))
    return 0


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
    lines += [f"skipped {s.where}: {s.reason}" for s in report.skipped]
    return "\n".join(lines)
