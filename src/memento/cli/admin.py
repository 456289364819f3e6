"""Terminal commands for the operator, who holds the database: list, show, forget and export
memories, and back up or restore a SQLite store.

Without `--agent` a command sees every namespace (the maintenance scope); with `--agent A` it
acts as agent A: A's memories and the shared pool, as an agent credential would (so `forget`
changes the pool only as far as MEMENTO_SHARED_POOL lets an agent). Reads and `forget` go
through the store protocol and the service, like every face; `backup` and `restore` are
file-level operations of the SQLite backend (storage/sqlite_backup.py). Every command prints
readable text, or with `--json` the same JSON the other faces return.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import textwrap
from datetime import UTC
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from ..app import App, build_app
from ..errors import Forbidden, InvalidArgument, MementoError, NotFound, Unavailable
from ..fields import AgentId
from ..models import MAINTENANCE_AGENTS, AgentScope, CallContext, ForgetInput, ForgetMode, Fragment, FragmentType, RelationType
from ..results import ForgetResult, FragmentView
from ..settings import Settings
from ..storage import sqlite_backup
from ..storage.protocol import SearchFilter
from .terminal import confirm, interactive, progress_bar

COMMANDS = ("list", "show", "forget", "export", "backup", "restore")
MAINTENANCE_SCOPE = "system"  # sees every namespace (models.MAINTENANCE_AGENTS)
MAX_LIST = 10_000
LINKS_SHOWN = 1000
SNIPPET_MIN = 30
_AGENT = TypeAdapter(AgentId)


def register(sub: Any) -> None:
    """Add the operator's commands to the `memento` parser's subparsers."""
    types = [t.value for t in FragmentType]
    agent_help = "act as this agent (its memories and the shared pool); default: every agent"

    lst = sub.add_parser("list", help="recent memories, newest first")
    lst.add_argument("--topic")
    lst.add_argument("--type", choices=types)
    lst.add_argument("--tag", action="append", dest="tags", help="only memories carrying this tag (repeatable: all of them)")
    lst.add_argument("--limit", type=int, default=20, help=f"at most this many (default 20, up to {MAX_LIST})")
    lst.add_argument("--agent", help=agent_help)
    lst.add_argument("--include-sessions", action="store_true", help="also working memory (session scope)")
    lst.add_argument("--json", action="store_true", help="print JSON")

    show = sub.add_parser("show", help="everything about one memory: its fields, links both ways, earlier versions, feedback")
    show.add_argument("id")
    show.add_argument("--agent", help=agent_help)
    show.add_argument("--json", action="store_true", help="print JSON")

    forget = sub.add_parser("forget", help="forget a memory by id, or every memory of a topic (restorable unless --hard)")
    forget.add_argument("id", nargs="?")
    forget.add_argument("--topic", help="forget every memory of this topic instead of one id")
    forget.add_argument("--force", action="store_true", help="also permanent-tier and anchored memories")
    forget.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation on a terminal")
    forget.add_argument("--agent", help=agent_help)
    forget.add_argument("--json", action="store_true", help="print JSON")
    forget.add_argument("--hard", action="store_true", help="erase for good, everywhere, and print the receipt (docs/erasure.md)")

    exp = sub.add_parser("export", help="write memories, versions, links and the entity graph (docs/export.md)")
    exp.add_argument("path", nargs="?", default="-", help="file to write (a folder with --folder); - (the default) is stdout")
    exp.add_argument("--format", dest="fmt", choices=["ndjson", "markdown", "csv"], default="ndjson", help="default: ndjson (lossless)")
    exp.add_argument("--folder", action="store_true", help="markdown: one note per memory in the folder PATH")
    exp.add_argument("--agent", action="append", dest="agents", help="export this agent (repeatable); default: every agent")
    exp.add_argument("--include-sessions", action="store_true", help="also working memory (session scope)")
    exp.add_argument("--include-forgotten", action="store_true", help="also soft-forgotten and expired memories")
    exp.add_argument(
        "--with-vectors",
        action="store_true",
        help="ndjson: each memory's stored vector too (an import into a store of the same model keeps it)",
    )
    exp.add_argument("--force", action="store_true", help="replace an existing file")
    exp.add_argument("--json", action="store_true", help="print the summary as JSON")

    bak = sub.add_parser("backup", help="copy the SQLite database to a file (safe while servers run)")
    bak.add_argument("path")
    bak.add_argument("--force", action="store_true", help="replace an existing file")
    bak.add_argument("--json", action="store_true", help="print the summary as JSON")

    res = sub.add_parser(
        "restore",
        help="replace the SQLite database with a backup (the replaced one is kept as <name>.before-restore-<time>)",
        description="Running servers see the restored memories at once and stay consistent (with REDIS_ENABLED the L1 keyword "
        "index is rebuilt); writes they make while the restore runs are lost, so stop them first when that matters.",
    )
    res.add_argument("path")
    res.add_argument("--force", action="store_true", help="replace an existing database")
    res.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.command in ("backup", "restore"):
        return _backup(args, settings) if args.command == "backup" else _restore(args, settings)
    app = _open(settings)
    try:
        if args.command == "list":
            return _list(app, args)
        if args.command == "show":
            return _show(app, args)
        if args.command == "forget":
            return _forget(app, args)
        return _export(app, args)
    except MementoError as exc:  # a memory merged away, forgotten or expired: say so (service.explain)
        raise app.service.explain(exc, CallContext(agent_id=_agent(getattr(args, "agent", None)))) from None
    finally:
        app.close()


# ---------------------------------------------------------------- helpers


def _open(settings: Settings) -> App:
    """The app without an embedder (no command here embeds anything); never creates a database."""
    if settings.backend == "sqlite" and not settings.sqlite_path.is_file():
        raise NotFound(f"no Memento database at {settings.sqlite_path} (DATABASE_URL); nothing stored yet")
    return build_app(settings, embedder=None)


def _agent(agent: str | None) -> str:
    """The namespace a command acts as: the given agent, or the maintenance scope."""
    if agent is None:
        return MAINTENANCE_SCOPE
    checked = _AGENT.validate_python(agent)
    if checked in MAINTENANCE_AGENTS:
        raise InvalidArgument(f"{checked!r} is the maintenance scope, not an agent; omit --agent to see every agent")
    return checked


def _print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2))


def _record(f: Fragment) -> dict[str, Any]:
    """A memory as JSON: its result form plus the session it belongs to."""
    return {**FragmentView.of(f).dump(), "sessionId": f.session_id}


def _snippet(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(width - 1, 1)] + "…"


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _when(f: Fragment) -> str:
    return f.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


# ---------------------------------------------------------------- list, show


def _list(app: App, args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= MAX_LIST:
        raise InvalidArgument(f"--limit must be between 1 and {MAX_LIST}")
    scope = AgentScope(_agent(args.agent))
    tags = tuple(dict.fromkeys(t.strip().lower() for t in args.tags or () if t.strip()))
    filt = SearchFilter(
        topic=args.topic, type=FragmentType(args.type) if args.type else None, tags_all=tags, all_sessions=args.include_sessions
    )
    app.store.flush_access()
    found = app.store.recent(scope, filt, args.limit)
    if args.json:
        _print_json({"fragments": [_record(f) for f in found], "count": len(found)})
        return 0
    if not found:
        print("No memories found.")
        return 0
    rows = [
        (f.id, f.type.value, _snippet(f.topic, 24), "session" if f.session_id else f.ttl_tier.value, _when(f), f.agent_id) for f in found
    ]
    heads = ("ID", "TYPE", "TOPIC", "TIER", "CREATED (UTC)", "AGENT")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]
    room = max(SNIPPET_MIN, shutil.get_terminal_size((120, 24)).columns - sum(widths) - 2 * len(widths))
    print("  ".join(h.ljust(w) for h, w in zip(heads, widths)) + "  CONTENT")
    for row, f in zip(rows, found):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + _snippet(f.content, room))
    print(f"-- {_count(len(found), 'memory', 'memories')}, newest first")
    return 0


def _show(app: App, args: argparse.Namespace) -> int:
    scope = AgentScope(_agent(args.agent))
    app.store.flush_access()
    found = app.store.get_many(scope, [args.id])
    if not found:
        raise NotFound(f"fragment {args.id!r} not found", missing=(args.id,))
    f = found[0]
    links = _links(app, scope, f)
    versions = [
        {_camel(k): v.isoformat() if hasattr(v, "isoformat") else v for k, v in row.items()} for row in app.store.versions(scope, f.id)
    ]
    tally = app.store.feedback_tallies(scope, [f.id]).get(f.id)
    feedback = dict(sorted(tally.counts.items())) if tally else {}  # 004: the feedback events on it, by kind
    if args.json:
        _print_json({"fragment": _record(f), "links": links, "versions": versions, "feedback": feedback})
        return 0
    record = _record(f)
    content = record.pop("content")
    width = max(len(k) for k in record)
    for key, value in record.items():
        print(f"{key.ljust(width)}  {value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}")
    print("content:")
    print(textwrap.indent(textwrap.fill(content, 100), "    "))
    print(f"links ({len(links)}):")
    for edge in links:
        arrow, end = ("->", edge["to"]) if edge["direction"] == "out" else ("<-", edge["from"])
        other = edge["other"]
        print(f"  {arrow} {edge['relation']:<13} {end}  [{other['type']}/{other['topic']}] {_snippet(other['content'], 60)}")
    print(f"versions ({len(versions)}):")
    for i, v in enumerate(versions, start=1):
        print(f"  {i}. {v['amendedAt']} by {v['amendedBy']}: [{v['type']}/{v['topic']}] {_snippet(str(v['content']), 60)}")
    if feedback:
        print("feedback: " + ", ".join(f"{event} {n}" for event, n in feedback.items()))
    return 0


def _links(app: App, scope: AgentScope, f: Fragment) -> list[dict[str, Any]]:
    """The fragment's links both ways, each with a glimpse of the memory at its other end."""
    links = []
    for link, other in app.store.neighbours(scope, [f.id], list(RelationType), LINKS_SHOWN):
        if other.id == f.id:
            continue
        links.append(
            {
                "direction": "out" if link.from_id == f.id else "in",
                "from": link.from_id,
                "to": link.to_id,
                "relation": link.relation_type.value,
                "createdAt": link.created_at.isoformat(),
                "other": {"id": other.id, "type": other.type.value, "topic": other.topic, "content": other.content},
            }
        )
    return links


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


# ---------------------------------------------------------------- forget, export


def _forget(app: App, args: argparse.Namespace) -> int:
    if (args.id is None) == (args.topic is None):
        raise InvalidArgument("give a memory id or --topic (one of them)")
    ctx = CallContext(agent_id=_agent(args.agent))
    inp = ForgetInput(id=args.id, topic=args.topic, force=args.force, mode=ForgetMode.HARD if args.hard else ForgetMode.SOFT)
    preview = app.service.views.preview_forget(inp, ctx)
    ask = preview.ids and (args.force or not preview.protected) and not args.yes and interactive()
    if ask:
        owners = sorted({f.agent_id for f in app.store.get_many(AgentScope(ctx.agent_id or MAINTENANCE_SCOPE), preview.ids)})
        what = f"memory {args.id}" if args.id else f"{_count(len(preview.ids), 'memory', 'memories')} of topic {args.topic!r}"
        undo = "This cannot be undone." if args.hard else "It stays restorable until the retention period ends."
        if not confirm(f"{'Erase' if args.hard else 'Forget'} {what} (agent {', '.join(owners)})? {undo}"):
            print("Nothing deleted.", file=sys.stderr)
            return 1
    try:
        result: ForgetResult = app.service.forget(inp, ctx)
    except Forbidden as exc:  # the service speaks of its parameter; here it is a flag
        raise Forbidden(exc.message.replace("need force=true", "need --force")) from exc
    if args.json:
        _print_json(result.dump())
        return 0
    verb = "erased" if result.mode == "hard" else "forgot"
    print(f"{verb} {_count(result.count, 'memory', 'memories')}" + (": " + ", ".join(result.deleted) if result.deleted else ""))
    if result.restorable_until:
        print(f"restorable until {result.restorable_until}")
    if result.receipt is not None:
        print(f"receipt {result.receipt.receipt_id} (digest {result.receipt.digest}); --json prints it whole")
    if result.message:
        print(result.message)
    return 0


def _export(app: App, args: argparse.Namespace) -> int:
    from . import export as exporting  # the formats (yaml) load only for an export, not for `serve`

    agents = [_agent(a) for a in args.agents] if args.agents else None
    chosen = {"agents": agents, "include_sessions": args.include_sessions, "include_forgotten": args.include_forgotten}
    if args.with_vectors and args.fmt != "ndjson":
        raise InvalidArgument("--with-vectors is for the ndjson format")
    if args.folder and (args.fmt != "markdown" or args.path == "-"):
        raise InvalidArgument("--folder writes Markdown notes into a folder: give --format markdown and a folder path")
    with progress_bar("exporting", "memories") as update:

        def write(out: Any) -> exporting.ExportReport:
            return exporting.export(app.store, out, fmt=args.fmt, progress=update, vectors=args.with_vectors, **chosen)

        if args.folder:
            report = exporting.export_notes(app.store, Path(args.path).expanduser(), overwrite=args.force, progress=update, **chosen)
        elif args.path == "-":
            report = write(sys.stdout)
        else:
            report = exporting.export_to_file(Path(args.path).expanduser(), write, overwrite=args.force)
    what = [_count(report.fragments, "memory", "memories")]
    if args.fmt == "ndjson":
        what += [_count(report.counts.get("versions", 0), "version", "versions"), _count(report.links, "link", "links")]
        what += [_count(report.entities, "entity", "entities")]
    summary = f"exported {', '.join(what[:-1])} and {what[-1]}" if len(what) > 1 else f"exported {what[0]}"
    summary += f" of {_count(len(report.agents), 'agent', 'agents')} to {report.path}"
    if args.path == "-":  # stdout holds the export
        print(summary, file=sys.stderr)
    elif args.json:
        _print_json(report.as_dict())
    else:
        print(summary)
    return 0


# ---------------------------------------------------------------- backup, restore


def _schema(migrations: list[str]) -> str:
    return migrations[-1].removesuffix(".sql") if migrations else "none"


def _sqlite_path(settings: Settings, command: str) -> Path:
    if settings.backend != "sqlite":
        raise Unavailable(
            f"`memento {command}` copies a SQLite database file, and this store is PostgreSQL: use pg_dump and pg_restore"
            " (e.g. pg_dump --format=custom --schema=agent_memory), or `memento export` for a portable copy of the memories"
        )
    return settings.sqlite_path


def _backup(args: argparse.Namespace, settings: Settings) -> int:
    database = _sqlite_path(settings, "backup")
    with progress_bar("backing up", "pages") as update:
        report = sqlite_backup.backup(database, Path(args.path).expanduser(), overwrite=args.force, progress=update)
    if args.json:
        _print_json({**report.as_dict(), "database": str(database)})
    else:
        print(f"backed up {database} to {report.path} ({report.bytes:,} bytes, integrity ok, schema {_schema(report.migrations)})")
    return 0


def _restore(args: argparse.Namespace, settings: Settings) -> int:
    database = _sqlite_path(settings, "restore")
    with progress_bar("restoring", "pages") as update:
        report = sqlite_backup.restore(Path(args.path).expanduser(), database, overwrite=args.force, progress=update)
    indexed = _rebuild_keyword_index(settings) if settings.redis_enabled else None
    if args.json:
        _print_json({**report.as_dict(), "source": args.path, "keywordIndexRebuilt": indexed})
        return 0
    print(f"restored {args.path} into {database} (schema {_schema(report.migrations)})")
    if indexed is not None:
        print(f"L1 keyword index rebuilt: {indexed} memories" if indexed >= 0 else "L1 keyword index NOT rebuilt (Redis unavailable)")
    if report.replaced:
        print(f"the replaced database is kept at {report.replaced}")
    for note in report.notes:
        print(note)
    return 0


def _rebuild_keyword_index(settings: Settings) -> int:
    """Bring the Redis L1 keyword index in line with the restored database (additive, then
    pruned of ids the database no longer has); -1 when Redis could not be reached."""
    app = build_app(settings, embedder=None)
    try:
        return app.keyword_index.rebuild_l1() if app.keyword_index is not None else -1
    finally:
        app.close()
