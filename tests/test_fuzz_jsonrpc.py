"""The JSON-RPC core is total: every input is answered, every answer is valid JSON in UTF-8.

Unit cases for each hostile input class (issue 17, defect 9), then properties over arbitrary
bytes, JSON values and JSON-RPC shapes, run in-process through `McpServer.handle` against a
real SQLite store. MEMENTO_FUZZ_EXAMPLES scales the properties.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from fuzz_helpers import INITIALIZED, MAX_DEPTH, Tally, answers_in, expected, initialize
from fuzz_strategies import fuzz_settings, raw_bodies, values
from hypothesis import given
from hypothesis import strategies as st

from memento.app import App
from memento.mcp import jsonrpc
from memento.mcp.jsonrpc import PARSE_ERROR, JsonRpcError
from memento.mcp.registry import default_features
from memento.mcp.server import McpServer, Session


def parse_error(raw: bytes | str) -> str:
    with pytest.raises(JsonRpcError) as caught:
        jsonrpc.decode(raw)
    assert caught.value.code == PARSE_ERROR and caught.value.to_response()["id"] is None
    return caught.value.message


@pytest.mark.parametrize(
    "raw",
    [
        b"[" * 100_000 + b"]" * 100_000,  # RecursionError inside the decoder
        b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
        b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1),  # parses, but deeper than the limit
    ],
)
def test_deep_nesting_is_a_parse_error(raw: bytes) -> None:
    assert "nested deeper" in parse_error(raw)


def test_nesting_up_to_the_limit_is_accepted() -> None:
    assert jsonrpc.MAX_DEPTH == MAX_DEPTH  # the oracle's copy
    assert jsonrpc.decode(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH) is not None


@pytest.mark.parametrize(
    "raw",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"p\xffing"}',  # invalid UTF-8
        b'{"jsonrpc":"2.0","id":1,"method":"\xed\xa0\x80"}',  # an encoded surrogate (CESU-8)
        '{"jsonrpc":"2.0","id":1,"method":"ping"}'.encode("utf-16"),  # UTF-8 only, no guessing
        b'{"jsonrpc":"2.0","id":NaN,"method":"ping"}',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":Infinity}}',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":-Infinity}}',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":1e999}}',  # a float overflow
        b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}',  # past int digit limit
        b"",
        b"\xef\xbb\xbf",
        b'{"jsonrpc":"2.0"',
    ],
)
def test_malformed_input_is_a_parse_error_never_another_exception(raw: bytes) -> None:
    parse_error(raw)


def test_a_utf8_bom_is_ignored() -> None:
    assert jsonrpc.decode(b'\xef\xbb\xbf{"a":1}') == {"a": 1}
    assert jsonrpc.decode('\ufeff{"a":1}') == {"a": 1}


def test_lone_surrogates_in_params_become_replacement_characters_and_the_id_is_kept() -> None:
    value = jsonrpc.decode(b'{"jsonrpc":"2.0","id":"\\ud800","method":"x\\udfff","params":{"\\udc00k":["a\\ud800b"]}}')
    parsed = jsonrpc.parse_message(value)
    assert isinstance(parsed, jsonrpc.Request)
    assert parsed.id == "\ud800" and parsed.method == "x\ufffd"
    assert parsed.params == {"\ufffdk": ["a\ufffdb"]}
    pair = jsonrpc.parse_message(jsonrpc.decode(b'{"jsonrpc":"2.0","method":"n","params":{"e":"\\ud83d\\ude00"}}'))
    assert pair.params == {"e": "\U0001f600"}  # type: ignore[union-attr]  # a valid pair is kept


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": "\ud800", "result": {"text": "a\udc00b"}},
        {"jsonrpc": "2.0", "id": 1, "result": {"score": float("nan"), "max": float("inf")}},
        {"jsonrpc": "2.0", "id": 1, "result": {"when": object(), ("a", 1): {1, 2}}},
        {"jsonrpc": "2.0", "id": 1, "result": {"deep": json.loads("[" * 300 + "]" * 300)}},
    ],
)
def test_encoding_always_gives_valid_json_in_utf8(message: dict[str, Any]) -> None:
    body = jsonrpc.dumps(message)
    text = body.decode("utf-8")  # strict: valid UTF-8
    decoded = json.loads(text, parse_constant=_refuse)  # valid JSON, no NaN
    assert decoded["id"] == message["id"] and "\n" not in text
    assert ("result" in decoded) or decoded["error"]["code"] == jsonrpc.INTERNAL_ERROR


def test_encoding_is_one_line_for_every_line_splitter() -> None:
    message = {"jsonrpc": "2.0", "id": "a\x85b", "result": {"t\u2028": "x\u2029y\r\nz"}}
    text = jsonrpc.encode(message)
    assert text.splitlines() == [text] and json.loads(text) == message


def _refuse(name: str) -> Any:
    raise AssertionError(f"{name} in output")


# ------------------------------------------------------------------ properties, in-process


@given(raw=st.binary(max_size=300) | raw_bodies())
@fuzz_settings(factor=10)
def test_decode_raises_only_parse_errors(raw: bytes) -> None:
    try:
        jsonrpc.decode(raw)
    except JsonRpcError as exc:
        assert exc.code == PARSE_ERROR


@given(value=values)
@fuzz_settings(factor=10)
def test_parse_and_encode_are_total(value: Any) -> None:
    try:
        parsed = jsonrpc.parse_message(value)
    except JsonRpcError as exc:
        reply: Any = exc.to_response()
    else:
        reply = {"jsonrpc": "2.0", "id": getattr(parsed, "id", None), "result": {"echo": value}}
    text = jsonrpc.dumps(reply).decode("utf-8")
    assert text.splitlines() == [text]
    json.loads(text, parse_constant=_refuse)


@pytest.fixture
def portal() -> Iterator[BlockingPortal]:
    with start_blocking_portal("asyncio") as running:
        yield running


def ready_session(server: McpServer, portal: BlockingPortal, version: str) -> Session:
    session = server.create_session()
    reply = portal.call(server.handle, initialize(version), session)
    assert isinstance(reply, dict) and "result" in reply, reply
    assert portal.call(server.handle, INITIALIZED, session) is None
    return session


@pytest.mark.parametrize("version", ["2025-03-26", "2025-11-25"])
def test_the_protocol_core_answers_every_message_exactly_once(app: App, portal: BlockingPortal, version: str) -> None:
    server = McpServer(app, features=default_features(app.settings))
    session = ready_session(server, portal, version)
    tally = Tally()
    batches = version == "2025-03-26"

    @given(raw=raw_bodies())
    @fuzz_settings(factor=5)
    def one(raw: bytes) -> None:
        want = expected(raw, batches=batches)
        try:
            value = jsonrpc.decode(raw)
        except JsonRpcError as exc:
            replies: Any = exc.to_response()
        else:
            replies = portal.call(server.handle, value, session)
        got = [] if replies is None else answers_in(json.loads(jsonrpc.dumps(replies)), batch=want.batch)
        tally.check(raw, want, got)

    one()
    assert tally.failures() == {}, tally.failures()
    assert portal.call(server.handle, {"jsonrpc": "2.0", "id": "last", "method": "ping"}, session) == {
        "jsonrpc": "2.0",
        "id": "last",
        "result": {},
    }
