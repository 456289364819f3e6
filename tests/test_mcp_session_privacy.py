"""Changes to working memory are announced to the owning namespace only (MCP resources).

A notification about another namespace's session would hand out its session id (in the
working-memory URI) and the fact that it is active; the shared pool does not make session
rows shared.
"""

from __future__ import annotations

import pytest
from mcp_fakes import FakeHub, FakeSession

from memento.app import App
from memento.auth.principal import Principal
from memento.mcp.resources import STATS_URI, ResourcesFeature, working_memory_uri
from memento.models import ChangeEvent

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def session_of(sid: str, agent: str | None, watched: list[str]) -> FakeSession:
    session = FakeSession(sid, state={"resources/subscriptions": watched})
    session.principal = Principal(subject=agent or "operator", agent_id=agent)  # type: ignore[attr-defined]
    return session


async def test_working_memory_changes_reach_only_their_namespace(app: App) -> None:
    uri = working_memory_uri("op-session")
    operator = session_of("op-session", None, [uri, STATS_URI])
    agent = session_of("agent-session", "agent-a", [uri, STATS_URI])
    feature = ResourcesFeature()
    feature.attach(FakeHub(app, [operator, agent]))
    for event in (
        ChangeEvent("created", "default", ("frag-1",), ("scratch",), "op-session"),
        ChangeEvent("session_ended", "default", session_id="op-session"),
    ):
        await feature.deliver(event)
    assert agent.sent == []
    assert {"uri": uri} in operator.of("notifications/resources/updated")
    # a change to the pool's permanent fragments still reaches every agent
    await feature.deliver(ChangeEvent("created", "default", ("frag-2",), ("conventions",)))
    assert agent.of("notifications/resources/updated") == [{"uri": STATS_URI}]
    assert all("op-session" not in str(params) for _, params in agent.sent)
