"""The single home of protocol-version-specific behaviour.

Everything that differs between MCP revisions is decided here from the negotiated version,
so handlers build one neutral shape and ask this module how to put it on the wire:

- 2024-11-05: tools carry name, description, inputSchema; results carry content, isError.
- 2025-03-26: tool annotations (readOnlyHint, destructiveHint, ...; their own title).
- 2025-06-18: Tool.title, outputSchema, structuredContent; Implementation.title.
- 2025-11-25: tasks and icons; SSE priming events (an id and empty data) and `retry`.
- 2026-07-28: stateless — no handshake (`server/discover`; version, client capabilities and
  client info in every request's `_meta`), `resultType` on every result, no sessions on HTTP.

`SUPPORTED` are the revisions a client reaches through `initialize`; `STATELESS` the one it
reaches without it. `REVISIONS` orders all of them for `at_least`.

Capabilities: `completions` from 2025-03-26, `tasks` from 2025-11-25. JSON-RPC batches exist
only in 2025-03-26.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from memento.results import wire_text

SUPPORTED: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
"""The handshake revisions, newest first; the order is the order of releases, not of string
comparison. `initialize` negotiates among these only."""
LATEST = SUPPORTED[0]
STATELESS = "2026-07-28"
"""The stateless revision: never negotiated by `initialize`, named in each request's `_meta`."""
REVISIONS: tuple[str, ...] = (STATELESS, *SUPPORTED)
"""Every revision spoken, newest first."""


def negotiate(requested: object) -> str:
    """Echo a supported requested version, otherwise answer with the newest (the client decides)."""
    return requested if isinstance(requested, str) and requested in SUPPORTED else LATEST


def is_supported(version: str) -> bool:
    return version in SUPPORTED


def is_stateless(version: str | None) -> bool:
    """Whether `version` is the stateless revision (no session, `_meta` on every request)."""
    return version == STATELESS


def at_least(version: str, minimum: str) -> bool:
    """True when `version` is a spoken revision no older than `minimum`."""
    if version not in REVISIONS or minimum not in REVISIONS:
        return False
    return REVISIONS.index(version) <= REVISIONS.index(minimum)


@dataclass(frozen=True)
class Features:
    """What a negotiated revision can carry."""

    tool_annotations: bool
    titles: bool
    structured_output: bool


def features(version: str) -> Features:
    return Features(
        tool_annotations=at_least(version, "2025-03-26"),
        titles=at_least(version, "2025-06-18"),
        structured_output=at_least(version, "2025-06-18"),
    )


@dataclass(frozen=True)
class ToolHints:
    """Behaviour hints (2025-03-26 annotations); the client must not trust them for safety."""

    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False


CAPABILITY_SINCE: dict[str, str] = {"completions": "2025-03-26", "tasks": "2025-11-25", "extensions": STATELESS}
"""Server capabilities a revision does not define are never sent to it."""
CAPABILITY_UNTIL: dict[str, str] = {"tasks": "2025-11-25"}
"""...nor those it no longer defines: the last revision that has each (tasks became the
`io.modelcontextprotocol/tasks` extension at 2026-07-28)."""


def gate_capabilities(version: str, capabilities: dict[str, Any]) -> dict[str, Any]:
    """`capabilities` without the entries `version` does not define."""
    return {
        key: value
        for key, value in capabilities.items()
        if (key not in CAPABILITY_SINCE or at_least(version, CAPABILITY_SINCE[key]))
        and (key not in CAPABILITY_UNTIL or at_least(CAPABILITY_UNTIL[key], version))
    }


STATELESS_ONLY_METHODS = frozenset({"server/discover"})
"""Methods only the stateless revision has."""
REMOVED_AT_STATELESS = frozenset({"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"})
"""Handshake-era methods 2026-07-28 removed: the handshake, `ping`, the session log level
(now `_meta` logLevel per request) and resource subscriptions (now `subscriptions/listen`)."""


def method_available(version: str, method: str) -> bool:
    """Whether a request of `version` may call `method` (others are -32601 Method not found)."""
    if is_stateless(version):
        return method not in REMOVED_AT_STATELESS
    return method not in STATELESS_ONLY_METHODS


def sse_priming(version: str | None) -> bool:
    """Whether SSE streams open with a priming event (id, empty data) and `retry`."""
    return version is not None and at_least(version, "2025-11-25")


def server_info(version: str, *, name: str, server_version: str, title: str) -> dict[str, Any]:
    """The `serverInfo` Implementation object."""
    info: dict[str, Any] = {"name": name, "version": server_version}
    if features(version).titles:
        info["title"] = title
    return info


def tool_definition(
    version: str,
    *,
    name: str,
    title: str,
    description: str,
    input_schema: dict[str, Any],
    output_schema: dict[str, Any] | None,
    hints: ToolHints,
) -> dict[str, Any]:
    """One entry of a `tools/list` result as the negotiated revision defines it."""
    feats = features(version)
    tool: dict[str, Any] = {"name": name, "description": description, "inputSchema": input_schema}
    if feats.titles and title.lower() != name.lower():  # a title that only capitalises the name adds nothing
        tool["title"] = title
    if feats.structured_output and output_schema is not None:
        tool["outputSchema"] = output_schema
    if feats.tool_annotations:
        tool["annotations"] = hint_annotations(title, hints, titled=feats.titles)
    return tool


def hint_annotations(title: str, hints: ToolHints, *, titled: bool) -> dict[str, Any]:
    """Tool annotations, only where a hint differs from the spec's default (readOnly false,
    destructive true, idempotent false, openWorld true); the title only where the revision has no
    top-level tool title."""
    out: dict[str, Any] = {} if titled else {"title": title}
    if hints.read_only:
        out["readOnlyHint"] = True
    elif not hints.destructive:
        out["destructiveHint"] = False
    if hints.idempotent:
        out["idempotentHint"] = True
    if not hints.open_world:
        out["openWorldHint"] = False
    return out


def tool_result(version: str, payload: dict[str, Any], *, structured: bool = False) -> dict[str, Any]:
    """A successful `tools/call` result: the JSON once, as text (what every host shows the
    model). With structured output on (MEMENTO_STRUCTURED_OUTPUT, 2025-06-18 and later) the same
    values also go as structuredContent, as the spec asks of a tool with an outputSchema."""
    text = wire_text(payload)
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
    if structured and features(version).structured_output:
        result["structuredContent"] = json.loads(text)  # the same values the text shows
    return result


def tool_error(version: str, code: str, message: str, *, structured: bool = False) -> dict[str, Any]:
    """A failed `tools/call` result (isError): text for the model, `Error (code): message`; with
    structured output on, the code and message also as structuredContent."""
    result: dict[str, Any] = {"content": [{"type": "text", "text": f"Error ({code}): {message}"}], "isError": True}
    if structured and features(version).structured_output:
        result["structuredContent"] = {"error": {"code": code, "message": message}}
    return result
