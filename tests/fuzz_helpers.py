"""Raw peers and the answer oracle of the fuzz suites: bytes in, every answer out, no SDK.

`expected(raw)` says, from the bytes alone, which answers a message is owed (by id; JSON null
for messages whose id cannot be read): one per request or bad message, none for notifications
and responses. The peers send raw bytes over a real transport and collect what comes back;
`Tally` counts the three failures the suites assert are zero: unanswered requests, answers
that are not JSON-RPC, and answers nobody was owed.
"""

from __future__ import annotations

import json
import math
import os
import queue
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from mcp_helpers import SERVE, TIMEOUT_S

NULL = "null"  # the key of answers whose id is null
MAX_DEPTH = 64  # the server's documented nesting limit (memento.mcp.jsonrpc.MAX_DEPTH)
VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")


def initialize(version: str, rid: Any = 0) -> dict[str, Any]:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}
    return {"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": params}


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def key(request_id: Any) -> str:
    """Answers are matched on the id's JSON text (ids may hold lone surrogates)."""
    return json.dumps(request_id)


# ------------------------------------------------------------------ oracle


def strict(raw: bytes) -> tuple[bool, Any]:
    """(parses, value) under RFC 8259 in UTF-8, no NaN/Infinity, at most MAX_DEPTH levels."""

    def refuse(_: str) -> Any:
        raise ValueError

    def finite(text: str) -> float:
        number = float(text)
        if not math.isfinite(number):
            raise ValueError
        return number

    try:
        value = json.loads(raw.removeprefix(b"\xef\xbb\xbf").decode("utf-8"), parse_constant=refuse, parse_float=finite)
    except (ValueError, RecursionError):
        return False, None
    return _depth(value) <= MAX_DEPTH, value


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)] if isinstance(value, (dict, list)) else []
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
    return deepest


def _valid_id(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def _owed(item: Any) -> str | None:
    """The id one message is answered with, or None when it gets no answer."""
    if not isinstance(item, dict):
        return NULL
    rid = key(item["id"]) if _valid_id(item.get("id")) else NULL
    if item.get("jsonrpc") != "2.0":
        return rid
    if "method" in item:
        method, params = item["method"], item.get("params")
        if not isinstance(method, str) or not method or not isinstance(params, (dict, type(None))):
            return rid
        return None if "id" not in item else rid
    if "result" in item or "error" in item:
        return NULL if ("result" in item) == ("error" in item) else None
    return rid


@dataclass
class Expected:
    ids: Counter[str] = field(default_factory=Counter)
    optional: set[str] = field(default_factory=set)  # cancelled in the same batch: may stay unanswered
    batch: bool = False  # answered with one JSON array
    parse_error: bool = False


def expected(raw: bytes, *, batches: bool) -> Expected:
    """What the server owes for `raw`, sent on a session that does (or not) take batches."""
    parses, value = strict(raw)
    if not parses:
        return Expected(Counter({NULL: 1}), parse_error=True)
    if not isinstance(value, list):
        owed = _owed(value)
        return Expected(Counter([owed] if owed else []))
    if not batches or not value:
        return Expected(Counter({NULL: 1}))
    found = Expected(batch=True)
    for item in value:
        owed = NULL if isinstance(item, list) else _owed(item)
        if owed:
            found.ids[owed] += 1
        if isinstance(item, dict) and item.get("method") == "notifications/cancelled":
            params = item.get("params")
            if isinstance(params, dict) and "requestId" in params:
                found.optional.add(key(params["requestId"]))
    return found


# ------------------------------------------------------------------ checking answers


def is_answer(message: Any) -> bool:
    """A JSON-RPC response: a result, or an error with an integer code and a string message."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or "method" in message:
        return False
    if not ("id" in message and (message["id"] is None or _valid_id(message["id"]))):
        return False
    if ("result" in message) == ("error" in message):
        return False
    error = message.get("error")
    return "result" in message or (
        isinstance(error, dict) and type(error.get("code")) is int and isinstance(error.get("message"), str)
    )


def is_server_message(message: Any) -> bool:
    """A notification or request the server sends on its own (logs, progress, list changes)."""
    return isinstance(message, dict) and message.get("jsonrpc") == "2.0" and isinstance(message.get("method"), str)


@dataclass
class Tally:
    """Across a run: messages sent, answers received, and the failures (all must stay 0)."""

    sent: int = 0
    answers: int = 0
    unanswered: list[str] = field(default_factory=list)
    not_jsonrpc: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)

    def check(self, raw: bytes, want: Expected, got: list[Any]) -> None:
        """Match `got` (the decoded answers) against `want`; record what does not fit."""
        self.sent += 1
        owed = Counter(want.ids)
        for answer in got:
            if not is_answer(answer):
                self.not_jsonrpc.append(f"{raw[:200]!r} -> {answer!r}"[:600])
                continue
            self.answers += 1
            rid = key(answer["id"])
            if owed[rid] > 0:
                owed[rid] -= 1
            else:
                self.unexpected.append(f"{raw[:200]!r} -> {answer!r}"[:600])
        for rid, count in owed.items():
            if count > 0 and rid not in want.optional:
                self.unanswered.append(f"{raw[:200]!r}: no answer for id {rid}")

    def failures(self) -> dict[str, list[str]]:
        return {
            name: items[:5]
            for name, items in (("unanswered", self.unanswered), ("not JSON-RPC", self.not_jsonrpc), ("unexpected", self.unexpected))
            if items
        }


def answers_in(value: Any, *, batch: bool) -> list[Any]:
    """The answers one body (or stdout line) carries: an array's items for a batch."""
    return list(value) if batch and isinstance(value, list) else [value]


# ------------------------------------------------------------------ stdio


class StdioPeer:
    """`memento serve --transport stdio`, fed raw lines; a thread reads every line it writes and
    answers the server's own requests (with an error) as a client would."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        with log.open("ab") as sink:
            self.process = subprocess.Popen(
                [*SERVE, "--transport", "stdio"], env={**os.environ, **env},
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sink,
            )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self._write_lock = threading.Lock()
        self._sentinels = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def write(self, line: bytes) -> None:
        assert self.process.stdin is not None
        with self._write_lock:
            self.process.stdin.write(line + b"\n")
            self.process.stdin.flush()

    def exchange(self, line: bytes, want: Expected) -> list[Any]:
        """Send `line`, then a ping; return what answers it (anything, decoded or raw) once
        every owed answer and the ping's have come, or the deadline passed."""
        self._sentinels += 1
        sentinel = f"sentinel-{self._sentinels}"
        self.write(line)
        self.write(json.dumps({"jsonrpc": "2.0", "id": sentinel, "method": "ping"}).encode())
        got: list[Any] = []
        owed, pinged = sum(want.ids.values()) - len(want.optional), False
        deadline = time.monotonic() + TIMEOUT_S
        while not (pinged and len(got) >= owed):
            try:
                raw = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if raw == b"":
                break  # the server exited: what is missing is unanswered
            try:
                message = json.loads(raw)
            except ValueError:
                got.append(raw)
                continue
            if isinstance(message, dict) and message.get("id") == sentinel and "method" not in message:
                pinged = True
            elif is_server_message(message):
                self._answer_request(message)
            elif want.batch and isinstance(message, list):
                got.extend(message)
            else:
                got.append(message)
        return got

    def _answer_request(self, message: dict[str, Any]) -> None:
        if "id" in message:
            error = {"code": -32601, "message": "not supported by the fuzz client"}
            self.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}).encode())

    def close(self) -> int:
        """EOF on stdin ends the session; returns the exit status."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            return self.process.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(timeout=TIMEOUT_S)


# ------------------------------------------------------------------ HTTP


def sse_messages(lines: Iterator[str]) -> Iterator[Any]:
    """The decoded `data` of each SSE event (events without data, like priming, are skipped);
    data that is not JSON comes back as the raw text."""
    data: list[str] = []
    for line in lines:
        if line == "":
            if data and "".join(data):
                text = "\n".join(data)
                try:
                    yield json.loads(text)
                except ValueError:
                    yield text
            data = []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))


def body_messages(response: httpx.Response, *, batch: bool) -> list[Any]:
    """The answers a (read) non-streaming HTTP response carries; a non-JSON body is returned raw."""
    try:
        value = response.json()
    except ValueError:
        return [response.content]
    return answers_in(value, batch=batch)
