"""Seed 004 on the memento toolset: privacy scopes (private | team | public), remember's `type`
naming a memory system, recall's `query` and `filters`, pin and unpin — on both backends.

Privacy (docs/privacy.md): isolation is per namespace; the shared pool `default` is the one place
every agent reads, and it shares only its `team` and `public` rows. A `team` or `public` memory
is stored there (under MEMENTO_SHARED_POOL's write rule); a `private` one is seen by its own
namespace alone, a private pool row by the pool's own principal alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from conftest import Clock
from pydantic import ValidationError

from memento.app import App, build_app
from memento.embeddings.hashing import HashEmbedder
from memento.errors import Forbidden, InvalidArgument, NotFound
from memento.models import AgentScope, AmendInput, CallContext, ForgetInput, PinInput, RecallInput, RememberInput
from memento.service import MemoryService
from memento.settings import Settings
from memento.storage.protocol import SearchFilter

pytestmark = pytest.mark.backends("sqlite", "postgres")

OPERATOR = CallContext(session_id="op-session")  # no agent: the operator, whose namespace is the pool
AGENT_A = CallContext(session_id="a-session", agent_id="agent-a")
AGENT_B = CallContext(session_id="b-session", agent_id="agent-b")


@pytest.fixture(params=["read", "write"])
def pooled(request: pytest.FixtureRequest, settings: Settings, clock: Clock) -> Iterator[tuple[str, App]]:
    built = build_app(settings.model_copy(update={"shared_pool": request.param}), embedder=HashEmbedder(256), clock=clock)
    yield request.param, built
    built.close()


def remember(service: MemoryService, ctx: CallContext, content: str, **kw: Any) -> Any:
    payload = {"topic": "notes", "type": "fact", **kw, "content": content}
    return service.remember(RememberInput.model_validate(payload), ctx)


def recalled(service: MemoryService, ctx: CallContext, **kw: Any) -> set[str]:
    payload = {"text": "harbour lighthouse keeper", "limit": 50, "includeLinks": False, **kw}
    return {item.id for item in service.recall(RecallInput.model_validate(payload), ctx).fragments}


def every_row(service: MemoryService) -> dict[str, Any]:
    return {f.id: f for f in service.store.list_fragments(AgentScope("system"), SearchFilter(all_sessions=True), 1000)}


def test_private_memories_stay_in_their_namespace_and_shared_ones_go_to_the_pool(pooled: tuple[str, App]) -> None:
    mode, app = pooled
    service = app.service
    mine = remember(service, AGENT_A, "The harbour lighthouse keeper is called Ansel").id
    assert every_row(service)[mine].agent_id == "agent-a"
    assert every_row(service)[mine].privacy_scope == "private"
    assert mine in recalled(service, AGENT_A)
    assert mine not in recalled(service, AGENT_B)
    before = set(every_row(service))
    if mode == "read":  # agent credentials may not add to the pool: a shared memory is refused, nothing stored
        with pytest.raises(Forbidden):
            remember(service, AGENT_A, "The harbour lighthouse keeper retires in May", privacyScope="team")
        assert set(every_row(service)) == before
        return
    shared = remember(service, AGENT_A, "The harbour lighthouse keeper retires in May", privacy_scope="team").id
    row = every_row(service)[shared]
    assert (row.agent_id, row.privacy_scope, row.origin_trace) == ("default", "team", {"sharedBy": "agent-a"})
    public = remember(service, AGENT_A, "The harbour lighthouse keeper log is public", record={"privacyScope": "public"}).id
    assert every_row(service)[public].agent_id == "default"
    assert {shared, public} <= recalled(service, AGENT_B)  # every agent reads what the pool shares
    assert {shared, public} <= recalled(service, AGENT_A)


def test_a_private_pool_memory_is_seen_by_the_pool_alone(pooled: tuple[str, App]) -> None:
    _, app = pooled
    service = app.service
    hidden = remember(service, OPERATOR, "The harbour lighthouse keeper's alarm code is 4471", privacyScope="private").id
    shared = remember(service, OPERATOR, "The harbour lighthouse keeper opens at nine").id
    rows = every_row(service)
    assert (rows[hidden].privacy_scope, rows[shared].privacy_scope) == ("private", "team")  # the pool's default is team
    assert {hidden, shared} <= recalled(service, OPERATOR)
    for agent in (AGENT_A, AGENT_B):
        assert shared in recalled(service, agent)
        assert hidden not in recalled(service, agent)
        assert service.store.get_many(AgentScope(agent.agent_id or ""), [hidden]) == []
        with pytest.raises(NotFound):
            service.forget(ForgetInput(id=hidden), agent)
    # narrowing it later hides it as well; widening an agent's own memory is refused
    service.amend(AmendInput.model_validate({"id": shared, "record": {"privacyScope": "private"}}), OPERATOR)
    assert shared not in recalled(service, AGENT_A)


def test_shared_memories_are_refused_where_they_cannot_go(app: App) -> None:
    service = app.service
    before = set(every_row(service))
    with pytest.raises(InvalidArgument, match="shared pool"):
        remember(service, OPERATOR, "The keeper's team note", privacyScope="team", agentId="agent-a")
    with pytest.raises(InvalidArgument, match="never shared"):
        remember(service, OPERATOR, "The keeper's session note", privacyScope="public", scope="session", sessionId="s1")
    with pytest.raises(ValidationError, match="disagree"):
        RememberInput.model_validate(
            {"content": "x", "topic": "t", "type": "fact", "privacyScope": "team", "record": {"privacyScope": "private"}}
        )
    assert set(every_row(service)) == before
    own = remember(service, AGENT_A, "The keeper's own note on the harbour").id
    with pytest.raises(InvalidArgument, match="remember it again"):
        service.amend(AmendInput.model_validate({"id": own, "record": {"privacyScope": "team"}}), AGENT_A)
    assert every_row(service)[own].privacy_scope == "private"


def test_remember_type_names_a_memory_system(service: MemoryService, ctx: CallContext) -> None:
    made = {
        system: remember(service, ctx, f"The harbour lighthouse {system} memory", type=system).fragment
        for system in ("episodic", "semantic", "procedural", "working")
    }
    assert {s: (f.type, f.memory_system) for s, f in made.items()} == {
        "episodic": ("episode", "episodic"),
        "semantic": ("fact", "semantic"),
        "procedural": ("procedure", "procedural"),
        "working": ("observation", "working"),
    }
    with pytest.raises(ValidationError, match="disagree"):
        RememberInput.model_validate({"content": "x", "topic": "t", "type": "episodic", "record": {"memorySystem": "semantic"}})
    with pytest.raises(ValidationError):
        RememberInput.model_validate({"content": "x", "topic": "t", "type": "dream"})


def test_recall_query_and_the_filters_object(service: MemoryService, ctx: CallContext, clock: Clock) -> None:
    old = remember(service, ctx, "The harbour lighthouse keeper painted the tower", type="episodic", tags=["project:harbour"]).id
    clock.now += timedelta(days=3)
    new = remember(service, ctx, "The harbour lighthouse keeper trains a successor", type="semantic", tags=["project:harbour", "people"]).id
    other = remember(service, ctx, "The harbour lighthouse keeper likes tea", type="semantic", tags=["project:garden"]).id
    assert recalled(service, ctx, text=None, query="harbour lighthouse keeper") == {old, new, other}
    assert recalled(service, ctx, filters={"type": ["episodic"]}) == {old}
    assert recalled(service, ctx, filters={"type": ["semantic", "episodic"]}) == {old, new, other}
    assert recalled(service, ctx, filters={"project_id": "harbour"}) == {old, new}
    assert recalled(service, ctx, filters={"tags": ["people"], "projectId": "harbour"}) == {new}
    created = {f.id: f.created_at for f in every_row(service).values()}
    assert recalled(service, ctx, filters={"timeFrom": created[new].isoformat()}) == {new, other}
    assert recalled(service, ctx, filters={"time_to": created[old].isoformat()}) == {old}  # inclusive
    assert recalled(service, ctx, filters={"type": ["procedural"]}) == set()
    with pytest.raises(ValidationError, match="same parameter"):
        RecallInput.model_validate({"text": "a", "query": "b"})
    with pytest.raises(ValidationError, match="after timeTo"):
        RecallInput.model_validate(
            {"query": "a", "filters": {"timeFrom": datetime(2026, 2, 1, tzinfo=UTC).isoformat(), "timeTo": "2026-01-01T00:00:00Z"}}
        )
    with pytest.raises(ValidationError):
        RecallInput.model_validate({"query": "a", "filters": {"colour": "red"}})


def test_recall_filters_agent_narrows_like_agent_id(app: App) -> None:
    service = app.service
    mine = remember(service, AGENT_A, "The harbour lighthouse keeper owes me a book").id
    assert recalled(service, OPERATOR, filters={"agent": "agent-a"}) >= {mine}
    assert mine not in recalled(service, OPERATOR)  # the operator's own namespace is the pool
    with pytest.raises(Forbidden):
        recalled(service, AGENT_B, filters={"agent": "agent-a"})
    with pytest.raises(ValidationError, match="disagree"):
        RecallInput.model_validate({"query": "a", "agentId": "agent-a", "filters": {"agent": "agent-b"}})


def test_pin_and_unpin(service: MemoryService, app: App) -> None:
    made = remember(service, AGENT_A, "The harbour lighthouse keeper's birthday is in June").id
    first = service.pin(PinInput(id=made), AGENT_A)
    again = service.pin(PinInput(id=made), AGENT_A)
    assert (first.pinned, first.changed, again.pinned, again.changed) == (True, True, True, False)
    assert every_row(service)[made].pinned is True
    assert len(service.store.versions(AgentScope("agent-a"), made)) == 1  # the change is archived once
    with pytest.raises(NotFound):  # another agent's memory does not exist for it
        service.unpin(PinInput(id=made), AGENT_B)
    assert every_row(service)[made].pinned is True
    off = service.unpin(PinInput(id=made), AGENT_A)
    assert (off.pinned, off.changed) == (False, True)
    assert every_row(service)[made].pinned is False
    with pytest.raises(NotFound):
        service.pin(PinInput(id="frag-missing"), AGENT_A)
