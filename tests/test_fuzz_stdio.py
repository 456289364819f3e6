"""The stdio transport answers every line, however hostile, and keeps serving.

A real `memento serve` process is fed raw lines (issue 17, defect 9: deep nesting and lone
surrogates once got no reply at all, and the client waited forever), then hypothesis-generated
bytes, JSON values and JSON-RPC shapes: 0 unanswered requests, 0 answers that are not JSON-RPC,
0 answers nobody was owed, a normal call still works, and no traceback in the server's log.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fuzz_helpers import HOSTILE, INITIALIZED, StdioPeer, Tally, expected, initialize, key
from fuzz_strategies import fuzz_settings, raw_bodies
from hypothesis import given
from mcp_helpers import server_env

pytestmark = pytest.mark.slow


def start(folder: Path, version: str) -> StdioPeer:
    peer = StdioPeer(server_env(folder / "memento.db"), folder / "server.log")
    peer.send(json.dumps(initialize(version)).encode())
    reply = peer.incoming.get(timeout=30)
    assert reply["result"]["protocolVersion"] == version, reply
    peer.send(json.dumps(INITIALIZED).encode())
    return peer


@pytest.fixture
def peer(tmp_path: Path) -> Iterator[StdioPeer]:
    running = start(tmp_path, "2025-06-18")
    yield running
    assert running.close() == 0
    assert "Traceback" not in (tmp_path / "server.log").read_text()


def call(peer: StdioPeer, rid: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()
    (answer,) = peer.exchange(line, expected(line, batches=False))
    assert isinstance(answer, dict), answer
    return answer


def test_every_hostile_line_gets_exactly_one_json_rpc_answer(peer: StdioPeer) -> None:
    tally = Tally()
    for line in HOSTILE:
        want = expected(line, batches=False)
        tally.check(line, want, peer.exchange(line, want))
    assert tally.failures() == {} and tally.answers == len(HOSTILE), tally.failures()
    assert call(peer, 99, "ping", {}) == {"jsonrpc": "2.0", "id": 99, "result": {}}


def test_a_lone_surrogate_id_comes_back_as_sent(peer: StdioPeer) -> None:
    line = b'{"jsonrpc":"2.0","id":"a\\ud800","method":"ping"}'
    (answer,) = peer.exchange(line, expected(line, batches=False))
    assert answer == {"jsonrpc": "2.0", "id": "a\ud800", "result": {}}


def test_lone_surrogates_in_tool_arguments_are_stored_as_replacement_characters(peer: StdioPeer) -> None:
    arguments = {"content": "cut emoji \ud83d here", "topic": "t\udc00", "type": "fact"}
    stored = call(peer, 1, "tools/call", {"name": "remember", "arguments": arguments})
    assert stored["result"]["isError"] is False, stored
    found = call(peer, 2, "tools/call", {"name": "recall", "arguments": {"text": "cut emoji \ud83d"}})
    fragments = json.loads(found["result"]["content"][0]["text"])["fragments"]
    assert [(f["content"], f["topic"]) for f in fragments] == [("cut emoji \ufffd here", "t\ufffd")]


@pytest.mark.parametrize("version", ["2025-03-26", "2025-11-25"])
def test_fuzzed_lines_are_all_answered_and_the_server_keeps_serving(tmp_path: Path, version: str) -> None:
    peer = start(tmp_path, version)
    tally = Tally()
    batches = version == "2025-03-26"

    @given(raw=raw_bodies(newline=False))
    @fuzz_settings(factor=5)
    def one(raw: bytes) -> None:
        if not raw.strip():
            return  # a blank line is no message (newline-delimited framing)
        want = expected(raw, batches=batches)
        tally.check(raw, want, peer.exchange(raw, want))

    try:
        one()
        assert tally.failures() == {}, tally.failures()
        answer = call(peer, "after", "tools/call", {"name": "memory_stats", "arguments": {}})
        assert key(answer["id"]) == '"after"' and answer["result"]["isError"] is False, answer
    finally:
        status = peer.close()
    log = (tmp_path / "server.log").read_text()
    assert status == 0 and "Traceback" not in log, log[-3000:]
    print(f"stdio {version}: {tally.sent} messages, {tally.answers} answers {dict(tally.kinds)}")
