"""`memento import`: Memento's own export and the stores people leave (the reference MCP memory
server's JSONL, mem0 exports, basic-memory folders, mcp-memory-service's SQLite database).

One module per format parses into plain records (memento.importers.records); the writer stores
them through MemoryService operations. docs/import.md describes each mapping.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from ..errors import InvalidArgument
from ..fields import AgentId
from ..models import CallContext
from ..service import MemoryService
from . import basic_memory, lossless, mcp_memory_service, mem0, memento_export, server_memory
from .records import ImportFormatError, Parsed
from .writer import ImportReport, Progress, dry_run, plan, write

READERS: dict[str, Callable[[Path], Parsed]] = {
    memento_export.FORMAT: memento_export.read,
    server_memory.FORMAT: server_memory.read,
    mem0.FORMAT: mem0.read,
    basic_memory.FORMAT: basic_memory.read,
    mcp_memory_service.FORMAT: mcp_memory_service.read,
}
FORMATS = tuple(READERS)
_AGENT_ID: TypeAdapter[str] = TypeAdapter(AgentId)

__all__ = ["FORMATS", "ImportFormatError", "ImportReport", "detect_format", "import_path", "read"]


def detect_format(path: Path) -> str:
    """The format of `path` from its shape: a folder or .md file is basic-memory, an SQLite file
    mcp-memory-service, JSON Lines with a memento-export header Memento's own, JSON Lines of
    entities and relations the reference server's, a JSON array or `results` object mem0's."""
    if not path.exists():
        raise InvalidArgument(f"{path}: no such file or folder")
    if path.is_dir() or path.suffix.lower() == ".md":
        return basic_memory.FORMAT
    if mcp_memory_service.is_database(path):
        return mcp_memory_service.FORMAT
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ImportFormatError(f"{path}: not UTF-8 text, nor an SQLite database; cannot tell its format") from None
    first = next((line for line in text.splitlines() if line.strip()), "")
    try:
        head = json.loads(first)
    except json.JSONDecodeError:
        head = None
    if memento_export.is_header(head):
        return memento_export.FORMAT
    if isinstance(head, dict) and head.get("type") in ("entity", "relation"):
        return server_memory.FORMAT
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, list) or (isinstance(whole, dict) and ("results" in whole or "memories" in whole)):
        return mem0.FORMAT
    raise ImportFormatError(f"{path}: cannot tell the format; give --format ({', '.join(FORMATS)})")


def read(path: Path, fmt: str = "auto") -> Parsed:
    """Parse `path` in format `fmt` (`auto`: detected)."""
    chosen = detect_format(path) if fmt == "auto" else fmt
    if chosen not in READERS:
        raise InvalidArgument(f"unknown format {fmt!r}; expected auto or one of {', '.join(FORMATS)}")
    if not path.exists():
        raise InvalidArgument(f"{path}: no such file or folder")
    if path.is_dir() and chosen != basic_memory.FORMAT:
        raise ImportFormatError(f"{path}: is a folder; the {chosen} format is a file")
    try:
        return READERS[chosen](path)
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"{path}: not UTF-8 text ({exc.reason}); is --format {chosen} right?") from None
    except OSError as exc:
        raise InvalidArgument(f"{path}: cannot read it ({exc.strerror or exc})") from None


def import_path(
    service: MemoryService,
    path: Path,
    *,
    fmt: str = "auto",
    agent: str | None = None,
    dry: bool = False,
    ctx: CallContext | None = None,
    progress: Progress | None = None,
    defer_embedding: bool = False,
) -> ImportReport:
    """Import `path` into the store behind `service`: parse and validate the whole input first
    (a bad record stores nothing), then remember and link; Memento's export version 2 is restored
    as it was instead (importers/lossless.py). `agent` puts every memory in that
    namespace; without it Memento's export keeps each memory's agent and other formats use
    `default`. `defer_embedding` (Memento's export): memories without a usable vector in the file
    are stored without one, for the embedding worker, instead of being embedded during the import."""
    if agent is not None:
        try:
            _AGENT_ID.validate_python(agent)
        except ValidationError:
            raise InvalidArgument(f"agent {agent!r} is not a valid agent id (1-128 of A-Z a-z 0-9 _ . : @ -); nothing imported") from None
    if fmt in ("auto", memento_export.FORMAT) and path.is_file() and lossless.is_v2_file(path):  # read a line at a time
        return lossless.import_v2(
            service, path, agent=agent, dry=dry, ctx=ctx or CallContext(), progress=progress, defer_embedding=defer_embedding
        )
    planned = plan(read(path, fmt), agent)
    report = dry_run(planned) if dry else write(service, planned, ctx or CallContext(), progress)
    return replace(report, source=str(path))
