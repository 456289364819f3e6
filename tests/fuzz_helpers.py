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

# Issue 17, defect 9, and its class: each once got a plain-text 500 over HTTP or no reply on stdio.
HOSTILE: list[bytes] = [
    b"[" * 100_000 + b"]" * 100_000,
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":' + b"[" * 5000 + b"]" * 5000 + b"}",
    b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}',
    b'{"jsonrpc":"2.0","id":2,"method":"\\udfff"}',
    b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"\\udc00":"\\ud800"}}',
    b'{"jsonrpc":"2.0","id":4,"method":"p\xffing"}',
    b'{"jsonrpc":"2.0","id":5,"method":"ping","params":{"x":NaN}}',
    b'{"jsonrpc":"2.0","id":6,"method":"ping","params":{"x":1e400}}',
    b'{"jsonrpc":"2.0","id":' + b"7" * 5000 + b',"method":"ping"}',
    b'\xef\xbb\xbf{"jsonrpc":"2.0","id":8,"method":"ping"}',
    # Unicode line breaks: httpx (the official Python SDK's SSE reader) splits lines on them.
    b'{"jsonrpc":"2.0","id":"a\xc2\x85b\xe2\x80\xa8c\xe2\x80\xa9","method":"ping"}',
    b'"just a string"',
    b"42",
    b"[]",
    b"[1,2]",
]


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
    return "result" in message or (isinstance(error, dict) and type(error.get("code")) is int and isinstance(error.get("message"), str))


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
    kinds: Counter[str] = field(default_factory=Counter)  # "result", "tool error" or the error code

    def check(self, raw: bytes, want: Expected, got: list[Any]) -> None:
        """Match `got` (the decoded answers) against `want`; record what does not fit."""
        self.sent += 1
        owed = Counter(want.ids)
        for answer in got:
            if not is_answer(answer):
                self.not_jsonrpc.append(f"{raw[:200]!r} -> {answer!r}"[:600])
                continue
            self.answers += 1
            self.kinds[_kind(answer)] += 1
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


def _kind(answer: dict[str, Any]) -> str:
    if "error" in answer:
        return str(answer["error"]["code"])
    result = answer["result"]
    return "tool error" if isinstance(result, dict) and result.get("isError") is True else "result"


def answers_in(value: Any, *, batch: bool) -> list[Any]:
    """The answers one body (or stdout line) carries: an array's items for a batch."""
    return list(value) if batch and isinstance(value, list) else [value]


# ------------------------------------------------------------------ peers on one stream


class StreamPeer:
    """A client whose answers arrive on one stream (stdout, or a legacy SSE stream): `incoming`
    holds what the server sends, decoded (or raw when it is not JSON); b"" ends it."""

    def __init__(self) -> None:
        self.incoming: queue.Queue[Any] = queue.Queue()
        self._sentinels = 0

    def send(self, raw: bytes) -> list[Any]:
        """Send one message; answers that come back at once (an HTTP body), if any."""
        raise NotImplementedError

    def exchange(self, raw: bytes, want: Expected) -> list[Any]:
        """Send `raw`, then a ping; return what answers `raw` once every owed answer and the
        ping's have come (answers run concurrently, so order proves nothing), or at a deadline."""
        self._sentinels += 1
        sentinel = f"sentinel-{self._sentinels}"
        got = self.send(raw)
        assert self.send(json.dumps({"jsonrpc": "2.0", "id": sentinel, "method": "ping"}).encode()) == []
        owed, pinged = sum(want.ids.values()) - len(want.optional), False
        deadline = time.monotonic() + TIMEOUT_S
        while not (pinged and len(got) >= owed):
            try:
                message = self.incoming.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if message == b"":
                break  # the stream ended: what is missing is unanswered
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
        # The server's own requests (elicitation, sampling, roots) get what a plain client says.
        if "id" in message:
            error = {"code": -32601, "message": "not supported by the fuzz client"}
            self.send(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}).encode())


def _decoded(raw: bytes | str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


class StdioPeer(StreamPeer):
    """`memento serve --transport stdio`, fed raw lines; a thread reads what it writes."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        super().__init__()
        with log.open("ab") as sink:
            self.process = subprocess.Popen(
                [*SERVE, "--transport", "stdio"], env={**os.environ, **env}, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sink
            )
        self._write_lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.incoming.put(_decoded(line))
        self.incoming.put(b"")

    def send(self, raw: bytes) -> list[Any]:
        assert self.process.stdin is not None
        with self._write_lock:
            self.process.stdin.write(raw + b"\n")
            self.process.stdin.flush()
        return []

    def close(self) -> int:
        """EOF on stdin ends the session; returns the exit status."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            return self.process.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(timeout=TIMEOUT_S)


class LegacySsePeer(StreamPeer):
    """A legacy HTTP+SSE session: GET /sse read by a thread, messages POSTed to its endpoint.
    A POST the server refuses (400, unparseable) answers in its own JSON body."""

    def __init__(self, base_url: str) -> None:
        super().__init__()
        self.http = httpx.Client(base_url=base_url, timeout=TIMEOUT_S)
        self.statuses: Counter[int] = Counter()
        self.refused: list[str] = []  # POST answers that were neither 202 nor 400 with JSON
        endpoint: queue.Queue[str] = queue.Queue()
        self._stop = threading.Event()
        threading.Thread(target=self._read, args=(endpoint,), daemon=True).start()
        self.endpoint = endpoint.get(timeout=TIMEOUT_S)

    def _read(self, endpoint: queue.Queue[str]) -> None:
        try:
            with self.http.stream("GET", "/sse") as response:
                event = ""
                for line in response.iter_lines():
                    if self._stop.is_set():
                        return
                    if line.startswith("event:"):
                        event = line[6:].strip()
                    elif line.startswith("data:"):
                        data = line[5:].removeprefix(" ")
                        if event == "endpoint":
                            endpoint.put(data)
                        else:
                            self.incoming.put(_decoded(data))
        except httpx.HTTPError:
            pass
        finally:
            self.incoming.put(b"")

    def send(self, raw: bytes) -> list[Any]:
        reply = self.http.post(self.endpoint, content=raw, headers={"content-type": "application/json"})
        self.statuses[reply.status_code] += 1
        if reply.status_code == 202:
            return []
        json_body = reply.headers.get("content-type", "").startswith("application/json")
        if reply.status_code != 400 or not json_body:
            self.refused.append(f"{raw[:200]!r} -> {reply.status_code} {reply.text[:200]}")
        return [_decoded(reply.content)]

    def close(self) -> None:
        self._stop.set()
        self.http.close()


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
