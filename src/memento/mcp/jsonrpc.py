"""JSON-RPC 2.0 envelopes: parsing, validation, error codes and response builders.

Transport-agnostic: the stdio and HTTP faces decode bytes with `decode`, classify the value
with `parse_message`, and hand the result to the protocol core. Batches (JSON arrays) exist
only in MCP 2025-03-26; the core unpacks them for such sessions and refuses them otherwise.

Both ends are total, so a hostile peer always gets an answer: `decode` turns anything that is
not one strict JSON text in UTF-8 (invalid UTF-8, NaN, numbers out of range, nesting deeper
than MAX_DEPTH) into a -32700 `JsonRpcError`, and `encode`/`dumps` always produce valid JSON
in UTF-8, whatever a reply holds. Lone surrogates (legal as JSON escapes, not Unicode) are
replaced by U+FFFD in params and results before the core sees them, so they never reach
storage; ids and methods are echoed exactly, as JSON escapes.
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass
from typing import Any, TypeAlias

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects a message may have (RFC 8259 §9 lets a parser set
one). Real MCP messages stay under ten; the C decoder's own limit (the recursion limit) would
leave values that later overflow the stack of any recursive code that walks them."""

RequestId: TypeAlias = str | int
Params: TypeAlias = dict[str, Any]

log = logging.getLogger(__name__)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # json.loads joins valid pairs already
_UTF8_BOM = b"\xef\xbb\xbf"
_LINE_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}


class JsonRpcError(Exception):
    """A protocol-level failure, answered with a JSON-RPC error object."""

    def __init__(self, code: int, message: str, *, data: Any = None, request_id: RequestId | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.request_id = request_id

    def to_response(self, request_id: RequestId | None = None) -> dict[str, Any]:
        """The error envelope; `request_id` wins over the id captured while parsing."""
        rid = request_id if request_id is not None else self.request_id
        return error_response(rid, self.code, self.message, self.data)


@dataclass(frozen=True)
class Request:
    id: RequestId
    method: str
    params: Params


@dataclass(frozen=True)
class Notification:
    method: str
    params: Params


@dataclass(frozen=True)
class Response:
    """A response the peer sent us (a result or an error) to a server→client request."""

    id: RequestId | None
    result: Any = None
    error: Any = None


Message: TypeAlias = Request | Notification | Response


def decode(raw: str | bytes) -> Any:
    """Decode one JSON text; anything else raises a -32700 `JsonRpcError` (never another error)."""
    try:
        text = _text(raw)
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except RecursionError:
        raise JsonRpcError(PARSE_ERROR, f"Parse error: nested deeper than {MAX_DEPTH}") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, too many digits, NaN
        raise JsonRpcError(PARSE_ERROR, f"Parse error: {_printable(str(exc))}") from None
    if _deeper_than(value, MAX_DEPTH):
        raise JsonRpcError(PARSE_ERROR, f"Parse error: nested deeper than {MAX_DEPTH}")
    return value


def _text(raw: str | bytes) -> str:
    # Strict UTF-8 (json.loads would also guess UTF-16/32 from bytes); a leading BOM is ignored,
    # as RFC 8259 §8.1 allows.
    if isinstance(raw, str):
        return raw.removeprefix("\ufeff")
    return raw.removeprefix(_UTF8_BOM).decode("utf-8")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number):
        raise ValueError("number out of range")
    return number


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether arrays/objects nest more than `limit` levels (iterative: no stack to overflow)."""
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, (dict, list)) else []
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _printable(text: str) -> str:
    return _LONE_SURROGATE.sub("\ufffd", text)


def scrub(value: Any) -> Any:
    """`value` with every lone surrogate in its strings and keys replaced by U+FFFD."""
    if isinstance(value, str):
        return value if value.isascii() else _printable(value)
    if isinstance(value, dict):
        return {scrub(key): scrub(item) for key, item in value.items()}
    if isinstance(value, list):
        return [scrub(item) for item in value]
    return value


def encode(message: Any) -> str:
    """Compact single-line JSON (safe for newline-delimited framing and SSE) that always
    encodes as UTF-8: see `dumps`."""
    try:
        text = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        text.encode("utf-8")  # lone surrogates pass json.dumps but are not UTF-8
    except (ValueError, TypeError, RecursionError):  # UnicodeEncodeError is a ValueError
        return _encode_repaired(message)
    # Unicode line breaks are legal in JSON strings, but clients that split lines the way
    # str.splitlines does (httpx, so the official Python SDK's SSE reader) would cut the
    # message in two: they go as escapes, as do C0 controls already.
    return text.translate(_LINE_BREAKS)


def dumps(message: Any) -> bytes:
    """`encode` as UTF-8 bytes: never raises, always one valid JSON text."""
    return encode(message).encode("utf-8")


def _encode_repaired(message: Any) -> str:
    # ASCII escapes carry lone surrogates losslessly (a client matches the id it sent);
    # NaN and infinities become null and unknown objects their text, rather than no reply.
    try:
        return json.dumps(_jsonable(message, MAX_DEPTH * 2), separators=(",", ":"))
    except (ValueError, TypeError, RecursionError):
        log.error("a reply could not be encoded as JSON; answering an internal error")
    rid = message.get("id") if isinstance(message, dict) and "method" not in message else None
    fallback = error_response(rid if _valid_id(rid) else None, INTERNAL_ERROR, "Internal error")
    return json.dumps(fallback, separators=(",", ":"))


def _jsonable(value: Any, depth: int) -> Any:
    if depth <= 0:
        raise ValueError("too deep to encode")
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, dict):
        return {str(key): _jsonable(item, depth - 1) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item, depth - 1) for item in value]
    return str(value)


def _valid_id(value: Any) -> bool:
    # MCP forbids null ids; bool is an int subclass and must not pass as one.
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def parse_message(value: Any) -> Message:
    """Classify a decoded JSON value; anything malformed raises a -32600 `JsonRpcError`.

    Params, results and errors come out scrubbed of lone surrogates (see `scrub`)."""
    if isinstance(value, list):
        raise JsonRpcError(INVALID_REQUEST, "Invalid Request: batches are not supported here")
    if not isinstance(value, dict):
        raise JsonRpcError(INVALID_REQUEST, "Invalid Request: expected a JSON object")
    raw_id = value.get("id")
    rid = raw_id if _valid_id(raw_id) else None
    if value.get("jsonrpc") != "2.0":
        raise JsonRpcError(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', request_id=rid)
    if "method" in value:
        method = value["method"]
        if not isinstance(method, str) or not method:
            raise JsonRpcError(INVALID_REQUEST, 'Invalid Request: "method" must be a string', request_id=rid)
        params = value.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise JsonRpcError(INVALID_REQUEST, 'Invalid Request: "params" must be an object', request_id=rid)
        if "id" not in value:
            return Notification(scrub(method), scrub(params))
        if rid is None:
            raise JsonRpcError(INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer')
        return Request(rid, scrub(method), scrub(params))
    if "result" in value or "error" in value:
        if ("result" in value) == ("error" in value):
            raise JsonRpcError(INVALID_REQUEST, "Invalid Request: a response has exactly one of result, error")
        return Response(rid, scrub(value.get("result")), scrub(value.get("error")))
    raise JsonRpcError(INVALID_REQUEST, "Invalid Request: neither a request, a notification nor a response", request_id=rid)


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """A notification envelope."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def request(request_id: RequestId, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """A request envelope (server→client requests)."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def is_batch(value: Any) -> bool:
    return isinstance(value, list)


def result_response(request_id: RequestId, result: dict[str, Any]) -> dict[str, Any]:
    """A success envelope."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(request_id: RequestId | None, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """An error envelope; `request_id` is None when the request's id could not be read."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}
