"""Sessions at MCP 2026-07-28: the `session` tool and the `session` argument (SEP-2567).

The revision has no protocol session, so what Memento keeps per session (working memory: 000's
`scope=session`, 002's session scope) is named by a server-minted handle the client passes as an
ordinary tool argument (`memento.session_handles`). At 2026-07-28 only:

- `tools/list` adds the `session` tool (open, status, close) after the selected toolsets' tools,
  and an optional `session` argument to the tools whose behaviour depends on working memory
  (`SESSION_TOOLS`), the same for every caller;
- `tools/call` takes the `session` argument off before the tool's own arguments are validated and
  runs the call in the handle's session. Without one, over stdio the connection is the session
  (its working memory ends with the connection, as at the older revisions; MEMORY_MCP_SESSION_ID
  still names 002's session scope); over HTTP the call has no session at all (the request's
  throwaway protocol session is never used as one), so `scope=session` is refused with a message
  saying how to open one, and nothing is kept past the request.

Older revisions see neither: their tools and their sessions are as they always were.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import anyio.to_thread

from memento.auth.principal import Principal
from memento.errors import InvalidArgument, MementoError
from memento.mcp import versions
from memento.mcp.namespace import CONNECTION_SESSION
from memento.mcp.tools import ToolSpec
from memento.mcp.versions import ToolHints
from memento.models import CallContext
from memento.service import MemoryService
from memento.session_handles import SessionInput, SessionResult

SESSION_ARGUMENT = "session"
SESSION_TOOLS = frozenset({"remember", "recall", "context", "summarize_thread", "commit_memory", "search_memories", "prune_memory"})
"""The tools whose behaviour depends on a session's working memory (any toolset)."""
SESSION_PROPERTY: dict[str, Any] = {"type": "string", "description": "Session handle."}


def _session_tool(service: MemoryService, inp: SessionInput, ctx: CallContext) -> SessionResult:
    return service.handles.run(inp, ctx)


SESSION_TOOL = ToolSpec(
    "session",
    "Session",
    "Working memory across calls: open returns a handle to pass as `session`; close ends it.",
    SessionInput,
    _session_tool,
    SessionResult,
    ToolHints(destructive=True),
)


def principal_key(principal: Principal) -> str:
    """The credential a handle is bound to."""
    return f"{principal.kind}:{principal.subject}"


def uses_sessions(tools: Sequence[ToolSpec]) -> bool:
    return any(spec.name in SESSION_TOOLS for spec in tools)


def stateless_tool(version: str, name: str, tools: Sequence[ToolSpec]) -> ToolSpec | None:
    """The `session` tool, when `name` asks for it at 2026-07-28 and the served tools use sessions."""
    if name == SESSION_TOOL.name and versions.is_stateless(version) and uses_sessions(tools):
        return SESSION_TOOL
    return None


def add_definitions(version: str, tools: Sequence[ToolSpec], definitions: list[dict[str, Any]], *, structured: bool = False) -> None:
    """At 2026-07-28: the `session` argument on `SESSION_TOOLS`' entries of `definitions` (the
    `tools/list` entries of `tools`, in order), then the `session` tool. Otherwise nothing."""
    if not versions.is_stateless(version) or not uses_sessions(tools):
        return
    for spec, definition in zip(tools, definitions, strict=True):
        if spec.name in SESSION_TOOLS:
            schema = definition["inputSchema"] = copy.deepcopy(definition["inputSchema"])
            schema.setdefault("properties", {})[SESSION_ARGUMENT] = dict(SESSION_PROPERTY)
    definitions.append(SESSION_TOOL.definition(version, structured=structured))


async def stateless_context(
    service: MemoryService, tool: str, arguments: Mapping[str, Any], ctx: CallContext, principal: Principal, state: Mapping[str, Any]
) -> tuple[dict[str, Any], CallContext]:
    """A 2026-07-28 call's arguments (the `session` argument taken off) and service context: the
    handle's session; without one the stdio connection's (`state`, as stdio seeds each request's
    session), else none. Raises a MementoError for a bad, unknown, expired or foreign handle."""
    home = state.get(CONNECTION_SESSION)  # stdio: the connection is the default session; HTTP: none
    ctx = replace(ctx, session_id=home if isinstance(home, str) else None, principal=principal_key(principal))
    if tool not in SESSION_TOOLS or SESSION_ARGUMENT not in arguments:
        return dict(arguments), ctx
    rest = {key: value for key, value in arguments.items() if key != SESSION_ARGUMENT}
    handle = arguments[SESSION_ARGUMENT]
    if handle is None:
        return rest, ctx
    if not isinstance(handle, str) or not handle:
        raise InvalidArgument("session: the handle the session tool returned (a string); nothing done")
    bound: CallContext = await anyio.to_thread.run_sync(service.handles.bind, handle, ctx)
    return rest, bound


def refused(version: str, exc: MementoError, *, structured: bool = False) -> dict[str, Any]:
    """A handle that cannot be used, as the tool's error result."""
    return versions.tool_error(version, exc.code, exc.message, structured=structured)
