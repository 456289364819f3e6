"""Working memory belongs to its session's owner, through the service.

Session-scoped rows are visible only in their own namespace, never through the shared pool; a
session id belongs to the namespace whose working memory first carried it, and every operation
taking a session id refuses another namespace's (Forbidden, nothing changed); ending a session
expunges only the owner's rows.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from conftest import Clock

from memento.errors import Forbidden, NotFound
from memento.models import (
    AgentScope,
    CallContext,
    ConsolidateInput,
    ContextInput,
    MemoryStatsInput,
    RecallInput,
    ReflectInput,
    RememberInput,
    ToolFeedbackInput,
)
from memento.service import MemoryService

pytestmark = pytest.mark.backends("sqlite", "postgres")

OPERATOR = CallContext(session_id="op-session")  # the operator key / loopback: admin, works in `default`
AGENT_A = CallContext(session_id="a-session", agent_id="agent-a")
AGENT_B = CallContext(session_id="b-session", agent_id="agent-b")


def remember(service: MemoryService, ctx: CallContext, content: str, **kw: Any) -> str:
    payload = {"topic": "work", "type": "fact", **kw, "content": content}
    return str(service.remember(RememberInput.model_validate(payload), ctx).id)


def everything(service: MemoryService) -> list[tuple[str, str, str | None, str]]:
    """Every fragment of every namespace, working memory included."""
    ids = service.store.ids_with_prefix(AgentScope("system"), "", 10_000)
    return sorted((f.id, f.agent_id, f.session_id, f.content) for f in service.store.get_many(AgentScope("system"), ids))


def test_an_agent_never_reads_the_operators_working_memory(service: MemoryService) -> None:
    secret = remember(service, OPERATOR, "operator scratch: the root password is in vault 7", scope="session", keywords=["rootpw"])
    shared = remember(service, OPERATOR, "the pool fact about vaults", keywords=["rootpw"])
    # not through recall (by text, keywords, with or without the operator's session id) ...
    for query in ({"text": "root password vault"}, {"keywords": ["rootpw"]}):
        found = service.recall(RecallInput.model_validate(query), AGENT_A)
        assert [f.id for f in found.fragments] == [shared]
    with pytest.raises(Forbidden):
        service.recall(RecallInput(text="root password", sessionId="op-session"), AGENT_A)
    # ... nor context, the working-memory view, fragment views, completion or statistics
    with pytest.raises(Forbidden):
        service.context(ContextInput(sessionId="op-session"), AGENT_A)
    assert service.context(ContextInput(types=["fact"]), AGENT_A).working_memory == []
    with pytest.raises(Forbidden):
        service.views.working_memory("op-session", AGENT_A)
    with pytest.raises(NotFound):
        service.views.get_fragment(secret, AGENT_A)
    assert secret not in service.views.fragment_ids(AGENT_A, "")
    assert service.memory_stats(MemoryStatsInput(), AGENT_A).working_memory == 0
    # the operator still has it
    assert [f.id for f in service.views.working_memory("op-session", OPERATOR)] == [secret]
    mine = service.recall(RecallInput(keywords=["rootpw"]), OPERATOR)
    assert secret in [f.id for f in mine.fragments]


def test_a_foreign_session_id_is_refused_everywhere_and_changes_nothing(service: MemoryService) -> None:
    remember(service, AGENT_B, "B's scratch", scope="session", sessionId="b-task")
    before = everything(service)
    attempts: list[Callable[[], object]] = [
        lambda: service.remember(RememberInput(content="planted", topic="t", type="fact", scope="session", sessionId="b-task"), AGENT_A),
        lambda: service.remember(RememberInput(content="planted", topic="t", type="fact", sessionId="b-task"), AGENT_A),
        lambda: service.recall(RecallInput(text="scratch", sessionId="b-task"), AGENT_A),
        lambda: service.context(ContextInput(sessionId="b-task"), AGENT_A),
        lambda: service.views.working_memory("b-task", AGENT_A),
        lambda: service.reflect(ReflectInput(summary="planted by A", sessionId="b-task"), AGENT_A),
        lambda: service.tool_feedback(ToolFeedbackInput(toolName="recall", relevant=True, sufficient=True, sessionId="b-task"), AGENT_A),
        # the operator's own namespace (`default`) does not own B's session either
        lambda: service.remember(RememberInput(content="planted", topic="t", type="fact", scope="session", sessionId="b-task"), OPERATOR),
    ]
    for attempt in attempts:
        with pytest.raises(Forbidden) as err:
            attempt()
        assert "another namespace" in err.value.message
    assert everything(service) == before
    # the transport's own session id, used implicitly, is the caller's as ever
    remember(service, AGENT_A, "A's scratch", scope="session")
    assert len(service.views.working_memory("a-session", AGENT_A)) == 1


def test_ending_a_session_expunges_only_the_owners_rows(service: MemoryService) -> None:
    b_rows = {remember(service, AGENT_B, f"B's scratch {i}", scope="session", sessionId="b-task") for i in range(2)}
    a_row = remember(service, AGENT_A, "A's scratch", scope="session")
    # A ends B's session id (e.g. names it as its own MCP session): B's rows stay
    assert service.end_session("b-task", AGENT_A) == 0
    assert {f.id for f in service.views.working_memory("b-task", AGENT_B)} == b_rows
    assert service.end_session("b-task", OPERATOR) == 0
    assert {f.id for f in service.views.working_memory("b-task", AGENT_B)} == b_rows
    # the owner's end removes exactly its own rows
    assert service.end_session("b-task", AGENT_B) == 2
    assert service.views.working_memory("b-task", AGENT_B) == []
    assert [f.id for f in service.views.working_memory("a-session", AGENT_A)] == [a_row]


def test_session_expiry_goes_by_each_owners_last_activity(service: MemoryService, clock: Clock) -> None:
    remember(
        service, AGENT_B, "B's old scratch", scope="session", sessionId="b-task", createdAt=(clock.now - timedelta(days=3)).isoformat()
    )
    fresh = remember(service, AGENT_B, "B's new scratch", scope="session", sessionId="b-task")
    stale = remember(service, AGENT_A, "A's old scratch", scope="session", createdAt=(clock.now - timedelta(days=3)).isoformat())
    service.memory_consolidate(ConsolidateInput(), AGENT_A)
    # B's session is still active (one recent row): it stays whole; A's idle session goes
    assert len(service.views.working_memory("b-task", AGENT_B)) == 2 and fresh
    assert service.store.get_many(AgentScope("system"), [stale]) == []
