"""Whose memory an MCP session reads and writes: the single place that decides it.

Until authentication lands every session works in the `default` agent namespace; a
credential will later narrow it here, and every feature follows.
"""

from __future__ import annotations

from memento.mcp.features import SessionView
from memento.models import DEFAULT_AGENT, AgentScope, CallContext


def namespace(session: SessionView) -> AgentScope:
    """The agent namespace of `session`."""
    return AgentScope(DEFAULT_AGENT)


def service_context(session: SessionView) -> CallContext:
    """The service call context for requests of `session`."""
    return CallContext(session_id=session.id, agent_id=namespace(session).agent_id)


def sees(session: SessionView, agent_id: str) -> bool:
    """Whether `session` may see changes made in `agent_id`'s namespace."""
    agents = namespace(session).visible_agents()
    return agents is None or agent_id in agents
