"""Whose memory an MCP session reads and writes: the single place that decides it.

A session belongs to the principal (credential) that opened it. An agent credential works in
its agent's namespace — it sees its own fragments and the shared `default` pool (000 §3.6) —
and an admin credential (the operator key, or no authentication on loopback/stdio) works in
`default`, where an explicit `agentId` argument may take it to any namespace. A read-only
credential is refused on every write by the service. Working memory is the exception to
sharing: changes to session rows are seen only in their own namespace, never through the pool.
Every feature (tools, resources, prompts, completion, tasks, notifications) follows what this
module says.
"""

from __future__ import annotations

from dataclasses import replace

from memento.auth.principal import ANONYMOUS, Principal
from memento.mcp.features import SessionView
from memento.models import DEFAULT_AGENT, AgentScope, CallContext


def principal(session: SessionView) -> Principal:
    """The credential `session` was opened with."""
    found = getattr(session, "principal", ANONYMOUS)
    return found if isinstance(found, Principal) else ANONYMOUS


def namespace(session: SessionView) -> AgentScope:
    """The agent namespace of `session`."""
    return AgentScope(principal(session).agent_id or DEFAULT_AGENT)


MEMORY_SESSION = "vault/session_id"  # session.state key: the 002 session id the client named (§4)
CONNECTION_SESSION = "stdio/session_id"  # session.state key (2026-07-28): the stdio connection's own session (mcp/handles.py)


def service_context(session: SessionView) -> CallContext:
    """The service call context for requests of `session` (with the 002 session id it named)."""
    context = principal(session).call_context(session.id)
    named = session.state.get(MEMORY_SESSION)
    return replace(context, memory_session_id=named) if isinstance(named, str) and named else context


def sees(session: SessionView, agent_id: str, *, working: bool = False) -> bool:
    """Whether `session` may see changes made in `agent_id`'s namespace. Changes to working
    memory (`working`) are seen only in their own namespace, never through the shared pool."""
    scope = namespace(session)
    agents = scope.visible_agents()
    if agents is None:
        return True
    return agent_id == scope.agent_id if working else agent_id in agents
