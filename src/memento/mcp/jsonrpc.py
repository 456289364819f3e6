"""JSON-RPC 2.0 envelopes: parsing, validation, error codes and response builders.

Transport-agnostic: the stdio and HTTP faces decode bytes with `decode`, classify the value
with `parse_message`, and hand the result to the protocol core. Batches (JSON arrays) exist
only in MCP 2025-03-26; the core unpacks them for such sessions and refuses them otherwise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeAlias

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

RequestId: TypeAlias = str | int
Params: TypeAlias = dict[str, Any]


class JsonRpcError(Exception):
    """A protocol-level failure, answered with a JSON-RPC error object."""

    def __init__(
        self, code: int, message: str, *, data: Any = None, request_id: RequestId | None = None
    ) -> None:
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
    """Decode one JSON text; malformed JSON raises a -32700 `JsonRpcError`."""
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise JsonRpcError(PARSE_ERROR, f"Parse error: {exc}") from None


def encode(message: dict[str, Any] | list[dict[str, Any]]) -> str:
    """Compact single-line JSON (safe for newline-delimited framing)."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


def _valid_id(value: Any) -> bool:
    # MCP forbids null ids; bool is an int subclass and must not pass as one.
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def parse_message(value: Any) -> Message:
    """Classify a decoded JSON value; anything malformed raises a -32600 `JsonRpcError`."""
    if isinstance(value, list):
        raise JsonRpcError(INVALID_REQUEST, "Invalid Request: batches are not supported here")
    if not isinstance(value, dict):
        raise JsonRpcError(INVALID_REQUEST, "Invalid Request: expected a JSON object")
    raw_id = value.get("id")
    rid = raw_id if _valid_id(raw_id) else None
    if value.get("jsonrpc") != "2.0":
        raise JsonRpcError(
            INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', request_id=rid
        )
    if "method" in value:
        method = value["method"]
        if not isinstance(method, str) or not method:
            raise JsonRpcError(
                INVALID_REQUEST, 'Invalid Request: "method" must be a string', request_id=rid
            )
        params = value.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise JsonRpcError(
                INVALID_REQUEST, 'Invalid Request: "params" must be an object', request_id=rid
            )
        if "id" not in value:
            return Notification(method, params)
        if rid is None:
            raise JsonRpcError(
                INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer'
            )
        return Request(rid, method, params)
    if "result" in value or "error" in value:
        if ("result" in value) == ("error" in value):
            raise JsonRpcError(
                INVALID_REQUEST, "Invalid Request: a response has exactly one of result, error"
            )
        return Response(rid, value.get("result"), value.get("error"))
    raise JsonRpcError(
        INVALID_REQUEST,
        "Invalid Request: neither a request, a notification nor a response",
        request_id=rid,
    )


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


def error_response(
    request_id: RequestId | None, code: int, message: str, data: Any = None
) -> dict[str, Any]:
    """An error envelope; `request_id` is None when the request's id could not be read."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}
