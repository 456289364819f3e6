"""Toolsets: each face of the engine declares its tools here, and MEMENTO_TOOLSETS picks the faces
an MCP server shows.

A toolset is a named group of ToolSpecs over the one MemoryService. Registering refuses a tool
name that another toolset already uses, so any selection of toolsets can be served together.
`memento` (seed 000's eleven tools) is the default; `all` selects every registered toolset.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from memento.errors import InvalidArgument
from memento.factory import TokenCounter
from memento.mcp.entity_tools import ENTITY_TOOLS
from memento.mcp.handles import add_definitions
from memento.mcp.protocol_tools import PROTOCOL_TOOLS
from memento.mcp.tasks import tool_execution
from memento.mcp.tools import TOOLS, ToolSpec
from memento.mcp.vault_tools import VAULT_TOOLS

DEFAULT_TOOLSETS = "memento"
ALL = "all"


@dataclass(frozen=True)
class Toolset:
    """A face's tools: `name` is what MEMENTO_TOOLSETS lists."""

    name: str
    description: str
    tools: tuple[ToolSpec, ...]


class ToolsetRegistry:
    """The toolsets known to this process, in registration order; tool names are unique across them."""

    def __init__(self, toolsets: Iterable[Toolset] = ()) -> None:
        self._toolsets: dict[str, Toolset] = {}
        self._owner: dict[str, str] = {}  # tool name -> toolset name
        for toolset in toolsets:
            self.register(toolset)

    def register(self, toolset: Toolset) -> None:
        """Add a toolset; refuses a reused toolset name or a tool name another toolset has."""
        if toolset.name in self._toolsets or toolset.name == ALL:
            raise ValueError(f"toolset {toolset.name!r} is already registered (or reserved)")
        names = [spec.name for spec in toolset.tools]
        if len(set(names)) != len(names):
            raise ValueError(f"toolset {toolset.name!r} lists a tool twice")
        taken = {name: self._owner[name] for name in names if name in self._owner}
        if taken:
            clash = ", ".join(f"{tool} (in {owner})" for tool, owner in sorted(taken.items()))
            raise ValueError(f"toolset {toolset.name!r} reuses tool names: {clash}")
        self._toolsets[toolset.name] = toolset
        self._owner.update(dict.fromkeys(names, toolset.name))

    def names(self) -> list[str]:
        return list(self._toolsets)

    def get(self, name: str) -> Toolset:
        return self._toolsets[name]

    def select(self, spec: str) -> tuple[ToolSpec, ...]:
        """The tools of a MEMENTO_TOOLSETS value (comma list; `all`), in registration order.

        An empty value means the default; an unknown name is an InvalidArgument naming the known ones."""
        wanted = [part.strip().lower() for part in spec.split(",") if part.strip()] or [DEFAULT_TOOLSETS]
        unknown = [name for name in wanted if name != ALL and name not in self._toolsets]
        if unknown:
            known = ", ".join([*self._toolsets, ALL])
            raise InvalidArgument(f"MEMENTO_TOOLSETS: unknown toolset(s) {', '.join(unknown)}; known: {known}")
        chosen = set(self._toolsets) if ALL in wanted else set(wanted)
        return tuple(spec for ts in self._toolsets.values() if ts.name in chosen for spec in ts.tools)


REGISTRY = ToolsetRegistry(
    [
        Toolset("memento", "Seed 000: typed fragments, the recall cascade, links, reflection and maintenance.", TOOLS),
        Toolset("entity", "Seed 001: entities, relations, search modes, confidence and consolidation.", ENTITY_TOOLS),
        Toolset("vault", "Seed 002: keyed memory in a session scope and a persistent vault.", VAULT_TOOLS),
        Toolset(
            "protocol",
            "Seed 003: memories with expiry and linkages, working-memory items, the skip list, the identity crystal, context and distill.",
            PROTOCOL_TOOLS,
        ),
    ]
)


def selected_tools(spec: str) -> tuple[ToolSpec, ...]:
    """The tools MEMENTO_TOOLSETS=`spec` shows, from the process registry."""
    return REGISTRY.select(spec)


_DEFINED: dict[tuple[tuple[ToolSpec, ...], str, bool], str] = {}  # tools/list entries as JSON, per toolset and revision
_DEFINED_MAX = 64


def tool_definitions(tools: Sequence[ToolSpec], version: str, *, structured: bool = False) -> list[dict[str, Any]]:
    """The `tools/list` entries of `tools` for the negotiated version (task support included).
    Built once per toolset, revision and output mode (the JSON schemas of ~20 input models take
    ~10 ms, which every session's listing paid); each caller gets its own copy."""
    key = (tuple(tools), version, structured)
    text = _DEFINED.get(key)
    if text is None:
        text = json.dumps(_build_definitions(tools, version, structured=structured))
        if len(_DEFINED) >= _DEFINED_MAX:
            _DEFINED.clear()
        _DEFINED[key] = text
    found: list[dict[str, Any]] = json.loads(text)
    return found


def _build_definitions(tools: Sequence[ToolSpec], version: str, *, structured: bool) -> list[dict[str, Any]]:
    definitions: list[dict[str, Any]] = []
    for spec in tools:
        definition = spec.definition(version, structured=structured)
        execution = tool_execution(version, spec.name)
        if execution:
            definition["execution"] = execution
        definitions.append(definition)
    add_definitions(version, tools, definitions, structured=structured)  # 2026-07-28: session handles (mcp/handles.py)
    return definitions


def list_tokens(tools: Sequence[ToolSpec], version: str, counter: TokenCounter | None = None, *, structured: bool = False) -> int:
    """cl100k tokens of the `tools/list` result for `tools` as sent (compact JSON): what a client
    pays in context for the toolset each session."""
    payload = json.dumps({"tools": tool_definitions(tools, version, structured=structured)}, ensure_ascii=False, separators=(",", ":"))
    return (counter or TokenCounter()).count(payload)
