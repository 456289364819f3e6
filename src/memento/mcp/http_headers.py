"""The request headers of Streamable HTTP at MCP 2026-07-28 (SEP-2243), checked against the body.

A 2026 POST mirrors parts of its body into headers so intermediaries can route on them:
`MCP-Protocol-Version` (the `_meta` protocol version), `Mcp-Method` (the method), `Mcp-Name`
(`params.name` of tools/call and prompts/get, `params.uri` of resources/read; `params.taskId` of
the tasks methods when sent) and, for a tool whose `inputSchema` marks a parameter with
`x-mcp-header: X`, `Mcp-Param-X` (that argument). A header that is required and missing, that
disagrees with the body, or that carries characters a header value may not, is refused with
HTTP 400 and HeaderMismatchError (-32020) before anything runs. Values that are not plain
header-safe ASCII come as `=?base64?<base64 of the UTF-8>?=`; they are decoded (strictly: bad
padding or alphabet is a mismatch) before comparing. Header names are case-insensitive; values
are compared exactly after trimming the optional whitespace around them.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Iterator, Mapping
from typing import Any

METHOD_HEADER = "mcp-method"
NAME_HEADER = "mcp-name"
PARAM_PREFIX = "mcp-param-"
VERSION_HEADER = "mcp-protocol-version"
META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
X_MCP_HEADER = "x-mcp-header"
SENTINEL_HEAD = "=?base64?"
SENTINEL_TAIL = "?="
NAME_SOURCES = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
"""Methods whose Mcp-Name is required, and the params field it mirrors."""
OPTIONAL_NAME_SOURCES = {"tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}
"""Methods whose Mcp-Name, when sent, must mirror a params field (the tasks extension)."""
SAFE_INTEGER = 2**53 - 1


class HeaderMismatch(ValueError):
    """A 2026 request whose headers disagree with its body (or lack required ones)."""


def _valid_chars(value: str) -> bool:
    """RFC 9110 field-value characters: visible ASCII, space and horizontal tab."""
    return all(ch == "\t" or " " <= ch <= "~" for ch in value)


def decode_value(header: str, raw: str, *, encoded: bool = True) -> str:
    """A header value as the body would hold it: trimmed, and (for the headers that allow it,
    `encoded`: Mcp-Name, Mcp-Param-*) with the Base64 sentinel decoded."""
    if not _valid_chars(raw):
        raise HeaderMismatch(f"Header mismatch: the {header} header carries characters a header value may not")
    value = raw.strip(" \t")
    if (
        encoded
        and len(value) >= len(SENTINEL_HEAD) + len(SENTINEL_TAIL)
        and value.startswith(SENTINEL_HEAD)
        and value.endswith(SENTINEL_TAIL)
    ):
        payload = value[len(SENTINEL_HEAD) : -len(SENTINEL_TAIL)]
        try:
            return base64.b64decode(payload.encode("ascii"), validate=True).decode("utf-8")
        except (binascii.Error, ValueError, UnicodeDecodeError):
            raise HeaderMismatch(f"Header mismatch: the {header} header is not valid Base64 of UTF-8 text") from None
    return value


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    return None if value is None else str(value)


def check_standard(headers: Mapping[str, str], message: Any) -> None:
    """MCP-Protocol-Version, Mcp-Method and Mcp-Name against a 2026 request body."""
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return  # not a request: parse errors are the JSON-RPC layer's to report
    method = message["method"]
    is_request = "id" in message
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    meta = params.get("_meta")
    version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
    raw_version = _header(headers, VERSION_HEADER)
    if isinstance(version, str):
        if raw_version is None:
            raise HeaderMismatch("Header mismatch: the MCP-Protocol-Version header is required")
        if decode_value("MCP-Protocol-Version", raw_version, encoded=False) != version:
            raise HeaderMismatch(
                f"Header mismatch: MCP-Protocol-Version header value {raw_version.strip()!r} does not match the body's {version!r}"
            )
    raw_method = _header(headers, METHOD_HEADER)
    if raw_method is None:
        if is_request:
            raise HeaderMismatch("Header mismatch: the Mcp-Method header is required")
    elif decode_value("Mcp-Method", raw_method, encoded=False) != method:
        raise HeaderMismatch(f"Header mismatch: Mcp-Method header value {raw_method.strip()!r} does not match the body's method {method!r}")
    if not is_request:
        return
    raw_name = _header(headers, NAME_HEADER)
    field = NAME_SOURCES.get(method)
    required = field is not None
    if field is None:
        field = OPTIONAL_NAME_SOURCES.get(method)
    if field is None:
        return
    body = params.get(field)
    if raw_name is None:
        if required and isinstance(body, str):
            raise HeaderMismatch(f"Header mismatch: the Mcp-Name header is required for {method}")
        return
    name = decode_value("Mcp-Name", raw_name)
    if not isinstance(body, str) or name != body:
        raise HeaderMismatch(f"Header mismatch: Mcp-Name header value {name!r} does not match the body's params.{field}")


def header_params(schema: Any) -> Iterator[tuple[tuple[str, ...], str, Any]]:
    """The `x-mcp-header` parameters of an inputSchema: (property path, header name, type),
    following only chains of `properties` keys from the root (as the spec allows)."""

    def walk(node: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], str, Any]]:
        properties = node.get("properties") if isinstance(node, dict) else None
        if not isinstance(properties, dict):
            return
        for key, child in properties.items():
            if not isinstance(child, dict):
                continue
            name = child.get(X_MCP_HEADER)
            if isinstance(name, str) and name:
                yield (*path, str(key)), name, child.get("type")
            yield from walk(child, (*path, str(key)))

    yield from walk(schema, ())


_MISSING = object()


def _at(arguments: Any, path: tuple[str, ...]) -> Any:
    node = arguments
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return _MISSING
        node = node[key]
    return node


def _matches(header_value: str, body: Any) -> bool:
    """Whether a decoded header value stands for the body value (integers numerically)."""
    if isinstance(body, bool):
        return header_value == ("true" if body else "false")
    if isinstance(body, int):
        try:
            number = float(header_value)
        except ValueError:
            return False
        return math.isfinite(number) and number == body and abs(body) <= SAFE_INTEGER
    if isinstance(body, str):
        return header_value == body
    return False  # objects, arrays and numbers are never mirrored


def check_custom(headers: Mapping[str, str], schema: Any, arguments: Any) -> None:
    """Every `Mcp-Param-*` header a tool's inputSchema designates, against the call's arguments:
    present exactly when the argument is (and not null), and equal to it."""
    for path, name, _ in header_params(schema):
        label = f"Mcp-Param-{name}"
        raw = _header(headers, PARAM_PREFIX + name.lower())
        body = _at(arguments, path)
        if body is _MISSING or body is None:
            if raw is not None:
                raise HeaderMismatch(f"Header mismatch: {label} header sent but arguments.{'.'.join(path)} is absent")
            continue
        if raw is None:
            raise HeaderMismatch(f"Header mismatch: the {label} header is required (arguments.{'.'.join(path)} is set)")
        value = decode_value(label, raw)
        if not _matches(value, body):
            raise HeaderMismatch(f"Header mismatch: {label} header value does not match arguments.{'.'.join(path)}")
