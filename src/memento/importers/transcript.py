"""A Claude Code session transcript (JSON Lines under ~/.claude/projects/) distilled into what a
session should leave behind, without a language model: deterministic heuristics over explicit
wording.

Transcript lines carry `type` (`user`, `assistant`, `summary`, `system`, ...), `message`
(`role`, `content`: a string or blocks of `text`, `thinking`, `tool_use` {name, input} and
`tool_result` {content, is_error}), `sessionId`, `cwd`, `timestamp`, `isSidechain` and `isMeta`.
Sidechains (subagents) and meta lines are left out; unreadable lines are counted and skipped (a
transcript may be cut mid-line while the host writes it).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePath
from typing import Any

MAX_ITEMS = 10  # per kind of memory, per session
MAX_SENTENCE = 1000  # a memory keeps 300 characters; this only bounds what is handed over
MAX_TOPIC = 200
EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[*_])")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_DECISION = re.compile(
    r"\b(?:decided|decision:|we chose|i chose|chose to|opted (?:for|to)|settled on|going with|"
    r"let'?s (?:use|go with|switch to|keep)|we(?:'ll| will) (?:use|go with|switch to|keep)|instead of)\b",
    re.IGNORECASE,
)
_FIX = re.compile(
    r"\b(?:fixed|the fix (?:is|was)|fix was|resolved|solved|root cause|the (?:issue|problem|bug|error|failure) was|"
    r"was caused by|turned out|works now|now passes|passes now)\b",
    re.IGNORECASE,
)
_PROCEDURE = re.compile(
    r"(?:\bto [\w\s-]{3,40}, run\b|\brun `[^`]+` to\b|\balways run\b|\bmake sure to\b|\bremember to\b|"
    r"\byou (?:need|have) to run\b|\bthe (?:command|way) to\b|\bsteps? to\b|\bprocedure:)",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"^(?:please\s+)?(?:always|never|don'?t ever|do not ever)\b|\bI (?:prefer|like|want you to)\b|\bfrom now on\b|\bplease (?:always|never)\b",
    re.IGNORECASE,
)
_OPEN = re.compile(r"\b(?:TODO|open question|still (?:need|needs|to be)|not yet|follow[- ]up|left to do|remains? to)\b", re.IGNORECASE)
_OFFER = re.compile(r"^(?:would you like|do you want|shall i|should i|let me know|want me to)\b", re.IGNORECASE)
_ERROR_LINE = re.compile(r"\b\w*(?:Error|Exception|Failure)\b:?[ \t].*|^FAILED .*|^error(?:\[\w+\])?: .*|\bfailed with .*", re.MULTILINE)


@dataclass
class Event:
    """One step of the conversation in order: what was said, run or failed."""

    kind: str  # user | assistant | error | edit
    text: str


@dataclass
class Transcript:
    """The parts of a transcript the heuristics read."""

    session_id: str | None = None
    cwd: str | None = None
    started: datetime | None = None
    events: list[Event] = field(default_factory=list)
    unreadable: int = 0

    @property
    def requests(self) -> list[str]:
        return [e.text for e in self.events if e.kind == "user"]

    @property
    def answers(self) -> list[str]:
        return [e.text for e in self.events if e.kind == "assistant"]


@dataclass(frozen=True)
class Distilled:
    """What a session leaves behind: a summary and typed items (reflect's lists, plus preferences)."""

    session_id: str
    project: str | None
    marker: str  # the summary's first words, unique to the session: "Session 1a2b3c4d"
    summary: str
    decisions: list[str]
    errors_resolved: list[str]
    procedures: list[str]
    open_questions: list[str]
    preferences: list[str]
    files: list[str]

    @property
    def topic(self) -> str:
        return self.project or "session"


def read_transcript(path: Path) -> Transcript:
    """Parse a transcript file (OSError if it cannot be read)."""
    found = Transcript()
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            found.unreadable += 1
            continue
        if isinstance(entry, dict):
            _entry(found, entry)
        else:
            found.unreadable += 1
    return found


def _entry(found: Transcript, entry: dict[str, Any]) -> None:
    if entry.get("type") not in ("user", "assistant") or entry.get("isSidechain") or entry.get("isMeta"):
        return
    found.session_id = found.session_id or _str(entry.get("sessionId"))
    found.cwd = found.cwd or _str(entry.get("cwd"))
    if found.started is None and isinstance(entry.get("timestamp"), str):
        try:
            found.started = datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00"))
        except ValueError:
            pass
    message = entry.get("message")
    if not isinstance(message, dict):
        return
    content = message.get("content")
    blocks: list[Any] = [{"type": "text", "text": content}] if isinstance(content, str) else content if isinstance(content, list) else []
    role = "user" if entry["type"] == "user" else "assistant"
    for block in blocks:
        if isinstance(block, dict):
            _block(found, role, block)


def _block(found: Transcript, role: str, block: dict[str, Any]) -> None:
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        text = block["text"].strip()
        if text and not (role == "user" and text.startswith("<")):  # slash-command wrappers and caveats
            found.events.append(Event(role, text))
    elif kind == "tool_use" and block.get("name") in EDIT_TOOLS and isinstance(block.get("input"), dict):
        target = block["input"].get("file_path") or block["input"].get("notebook_path")
        if isinstance(target, str):
            found.events.append(Event("edit", target))
    elif kind == "tool_result":
        error = _error_line(_result_text(block.get("content"))) if block.get("is_error") is True else None
        if error:
            found.events.append(Event("error", error))


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def _error_line(text: str) -> str | None:
    """The most telling line of a failed tool's output: its last `...Error: ...` line, else its first line."""
    lines = [m.group(0).strip() for m in _ERROR_LINE.finditer(text)]
    if lines:
        return lines[-1][:200]
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first[:200] or None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


# ---------------------------------------------------------------- distillation


def sentences(text: str) -> list[str]:
    """Prose split into sentences: code blocks dropped, list markers and headings stripped."""
    out: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or not line.strip() or line.lstrip().startswith("#"):
            continue
        out += [_clip(s.strip(), MAX_SENTENCE) for s in _SENTENCE.split(_BULLET.sub("", line).strip()) if len(s.strip()) >= 12]
    return out


def distill(transcript: Transcript, session_id: str | None = None, cwd: str | None = None) -> Distilled | None:
    """The session's memories, or None when it holds no conversation."""
    requests, answers = transcript.requests, transcript.answers
    if not requests and not answers:
        return None
    sid = session_id or transcript.session_id or "unknown"
    directory = cwd or transcript.cwd
    project = PurePath(directory).name[:MAX_TOPIC] if directory else None
    marker = f"Session {hashlib.sha256(sid.encode()).hexdigest()[:8]}"
    files = _files(transcript, directory)
    preferences = _matching(requests, _PREFERENCE)
    return Distilled(
        session_id=sid,
        project=project or None,
        marker=marker,
        summary=_summary(marker, project, transcript, files),
        decisions=_matching(answers + requests, _DECISION),
        errors_resolved=_errors_resolved(transcript.events),
        procedures=[p for p in _matching(answers + requests, _PROCEDURE) if p not in preferences],
        open_questions=_open_questions(answers[-1] if answers else ""),
        preferences=preferences,
        files=files,
    )


def _summary(marker: str, project: str | None, transcript: Transcript, files: list[str]) -> str:
    where = f" in {project}" if project else ""
    when = f" on {transcript.started.date().isoformat()}" if transcript.started else ""
    requests = transcript.requests
    parts = [f"{marker}{where}{when}"]
    if requests:
        more = f" (+{len(requests) - 1} more requests)" if len(requests) > 1 else ""
        parts.append(f"request: {_clip(_first_sentence(requests[0]), 110)}{more}")
    if transcript.answers:
        parts.append(f"outcome: {_clip(_first_sentence(transcript.answers[-1]), 110)}")
    if files:
        parts.append(f"files changed: {', '.join(files[:4])}" + (f" (+{len(files) - 4})" if len(files) > 4 else ""))
    rest = "; ".join(parts[1:])
    return f"{parts[0]} — {rest}" if rest else parts[0]


def _first_sentence(text: str) -> str:
    found = sentences(text)
    return (found[0] if found else " ".join(text.split())).rstrip(".")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _matching(texts: list[str], pattern: re.Pattern[str]) -> list[str]:
    found = [s for text in texts for s in sentences(text) if pattern.search(s)]
    return list(dict.fromkeys(found))[:MAX_ITEMS]


def _errors_resolved(events: list[Event]) -> list[str]:
    """Each tool error paired with the first later assistant sentence that says how it was fixed."""
    fixes = [(i, s) for i, e in enumerate(events) if e.kind == "assistant" for s in sentences(e.text) if _FIX.search(s)]
    out: dict[str, str] = {}  # error line -> the memory
    used: set[str] = set()
    for index, event in enumerate(events):
        if event.kind != "error" or event.text in out:
            continue
        fix = next((s for i, s in fixes if i > index and s not in used), None)
        if fix is not None:
            used.add(fix)
            out[event.text] = f"{event.text} — fix: {fix}"
    return list(out.values())[:MAX_ITEMS]


def _open_questions(final: str) -> list[str]:
    found = [s for s in sentences(final) if (s.endswith("?") and not _OFFER.search(s)) or _OPEN.search(s)]
    return list(dict.fromkeys(found))[:MAX_ITEMS]


def _files(transcript: Transcript, cwd: str | None) -> list[str]:
    """Files the session edited or wrote, relative to the project when inside it."""
    out: list[str] = []
    for event in transcript.events:
        if event.kind != "edit":
            continue
        path = PurePath(event.text)
        if cwd and path.is_relative_to(cwd):
            path = path.relative_to(cwd)
        if str(path) not in out:
            out.append(str(path))
    return out
