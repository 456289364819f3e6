"""Agent-host hooks (docs/hooks.md): `memento context` prints what to inject at session start;
`memento hook session-end` turns a finished (or compacting) session's transcript into memories.

A hook must never break its host: `hook session-end` reports a problem on stderr and exits 0
(Claude Code treats exit 2 as blocking for PreCompact, and any other non-zero code as an error
shown to the user); the session simply leaves no memories.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..app import build_app
from ..errors import MementoError
from ..importers.session import remember_session
from ..importers.transcript import distill, read_transcript
from ..models import CallContext, ContextInput, FragmentType
from ..results import ContextResult, FragmentView
from ..settings import Settings

COMMANDS = ("context", "hook")
NEVER_BLOCK = ("hook",)  # commands that exit 0 whatever happens (main reads it for configuration errors)
CONTEXT_TYPES = [FragmentType.PREFERENCE, FragmentType.PROCEDURE, FragmentType.ERROR, FragmentType.DECISION]
SECTIONS = (
    (FragmentType.PREFERENCE, "Preferences"),
    (FragmentType.PROCEDURE, "Procedures"),
    (FragmentType.ERROR, "Errors and fixes"),
    (FragmentType.DECISION, "Recent decisions"),
)
MAX_HOOK_INPUT = 1_000_000


def register(sub: Any) -> None:
    """Add `context` and `hook` to the `memento` parser's subparsers."""
    ctx = sub.add_parser("context", help="print the memory to load at session start (a SessionStart hook)")
    ctx.add_argument("--format", dest="fmt", choices=["markdown", "json"], default="markdown")
    ctx.add_argument("--agent", dest="agent_id")
    ctx.add_argument("--budget", type=int, default=2000, help="token budget (default 2000)")
    ctx.add_argument("--session", dest="session_id", help="also show this session's working memory")

    hook = sub.add_parser("hook", help="agent-host hooks (docs/hooks.md)")
    events = hook.add_subparsers(dest="event", required=True)
    end = events.add_parser("session-end", help="distill a session transcript into memories (SessionEnd, PreCompact)")
    end.add_argument("--transcript", type=Path, help="the transcript file (default: transcript_path of the hook input on stdin)")
    end.add_argument("--agent", dest="agent_id")
    end.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.command == "context":
        return _context(args, settings)
    return _session_end(args, settings)


# ---------------------------------------------------------------- context


def _context(args: argparse.Namespace, settings: Settings) -> int:
    payload: dict[str, Any] = {"tokenBudget": args.budget, "types": CONTEXT_TYPES}
    for key, value in (("agentId", args.agent_id), ("sessionId", args.session_id)):
        if value is not None:
            payload[key] = value
    inp = ContextInput.model_validate(payload)
    app = build_app(settings)
    try:
        result = app.service.context(inp, CallContext())
    finally:
        app.close()
    if args.fmt == "json":
        print(json.dumps(result.dump(), ensure_ascii=False, indent=2))
    else:
        print(markdown(result, args.agent_id or "default"))
    return 0


def markdown(result: ContextResult, agent: str) -> str:
    """Core memory by kind (decisions newest first) and the session's working memory, one line
    per memory with its id; a one-line note when there is nothing."""
    if not result.core_memory and not result.working_memory:
        return f"_Memento has no memories for agent `{agent}` yet._"
    lines = [f"# What Memento remembers (agent `{agent}`)"]
    for type_, title in SECTIONS:
        items = [f for f in result.core_memory if f.type is type_]
        if type_ is FragmentType.DECISION:
            items.sort(key=lambda f: f.created_at, reverse=True)
        if items:
            lines += ["", f"## {title}", *(_line(f) for f in items)]
    if result.working_memory:
        lines += ["", "## This session's working memory", *(_line(f) for f in result.working_memory)]
    return "\n".join(lines)


def _line(f: FragmentView) -> str:
    return f"- {' '.join(f.content.split())} (id {f.id})"


# ---------------------------------------------------------------- session end


def _session_end(args: argparse.Namespace, settings: Settings) -> int:
    """The hook: every failure is a line on stderr and exit 0, so the host carries on."""
    try:
        return _distill_and_store(args, settings)
    except MementoError as exc:
        _warn(f"{exc.code}: {exc.message}")
    except Exception as exc:  # noqa: BLE001 - the top-level handler of a hook: the host must not break
        _warn(f"unexpected {type(exc).__name__}: {exc}")
    return 0


def _distill_and_store(args: argparse.Namespace, settings: Settings) -> int:
    hook = {} if args.transcript is not None else _hook_input()
    if hook is None:
        return 0
    path = args.transcript or (Path(hook["transcript_path"]).expanduser() if isinstance(hook.get("transcript_path"), str) else None)
    if path is None:
        _warn("the hook input has no transcript_path (give --transcript PATH); nothing stored")
        return 0
    try:
        transcript = read_transcript(path)
    except OSError as exc:
        _warn(f"cannot read the transcript {path}: {exc.strerror or exc}; nothing stored")
        return 0
    session = hook.get("session_id") if isinstance(hook.get("session_id"), str) else None
    cwd = hook.get("cwd") if isinstance(hook.get("cwd"), str) else None
    distilled = distill(transcript, session or transcript.session_id or path.stem, cwd)
    if distilled is None:
        _warn(f"the transcript {path} holds no conversation; nothing stored")
        return 0
    app = build_app(settings)
    try:
        report = remember_session(app.service, distilled, CallContext(), args.agent_id)
    finally:
        app.close()
    if args.json:
        print(json.dumps(report.as_dict()))
    else:
        print(f"memento: {report.marker}: {report.memories} memories under topic {report.topic!r} ({report.created} new)")
    return 0


def _hook_input() -> dict[str, Any] | None:
    """The JSON object the host writes on stdin, or None (reported) when there is none."""
    if sys.stdin.isatty():
        _warn("no hook input on stdin (give --transcript PATH to run it by hand); nothing stored")
        return None
    raw = sys.stdin.read(MAX_HOOK_INPUT)
    try:
        found = json.loads(raw)
    except json.JSONDecodeError as exc:
        _warn(f"the hook input on stdin is not JSON ({exc.msg}); nothing stored")
        return None
    if not isinstance(found, dict):
        _warn("the hook input on stdin is not a JSON object; nothing stored")
        return None
    return found


def _warn(message: str) -> None:
    print(f"memento hook: {message}", file=sys.stderr)
