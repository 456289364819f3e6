"""Opaque list cursors shared by the list methods of the features (resources, prompts, tasks).

A cursor is base64url JSON naming the list it belongs to and a position in it; anything the
server did not issue for that list is answered with -32602.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from memento.mcp.jsonrpc import INVALID_PARAMS, JsonRpcError


def encode_cursor(kind: str, position: int | str) -> str:
    raw = json.dumps({"k": kind, "p": position}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(kind: str, params: dict[str, Any]) -> int | str | None:
    """The position of `params["cursor"]` in list `kind`; None when there is no cursor."""
    cursor = params.get("cursor")
    if cursor is None:
        return None
    if not isinstance(cursor, str):
        raise JsonRpcError(INVALID_PARAMS, "Invalid params: cursor must be a string")
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        value = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise JsonRpcError(INVALID_PARAMS, "Invalid params: unknown cursor") from None
    if not isinstance(value, dict) or value.get("k") != kind:
        raise JsonRpcError(INVALID_PARAMS, "Invalid params: unknown cursor")
    position = value.get("p")
    if isinstance(position, bool) or not isinstance(position, (int, str)):
        raise JsonRpcError(INVALID_PARAMS, "Invalid params: unknown cursor")
    return position


def offset_page(kind: str, params: dict[str, Any], total: int, size: int) -> tuple[int, int, str | None]:
    """(start, end, nextCursor) of an offset-paged list of `total` items."""
    position = decode_cursor(kind, params)
    start = 0
    if position is not None:
        if not isinstance(position, int) or not 0 < position < total:
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: unknown cursor")
        start = position
    end = min(start + size, total)
    return start, end, encode_cursor(kind, end) if end < total else None
