"""The shared `default` pool's one write rule (MEMENTO_SHARED_POOL), through the service.

`read`: agent credentials read the pool; only admin principals add to it, amend, supersede,
link from it or forget in it. `write` (000 §3.6): read-write agent credentials may also add,
amend and forget its non-anchored fragments. Anchored pool fragments are admin-only in both.
A refused write is Forbidden and changes nothing. Every store checks the rule again.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from conftest import Clock

from memento.app import App, build_app
from memento.embeddings.hashing import HashEmbedder
from memento.errors import Forbidden
from memento.models import (
    AgentScope,
    AmendInput,
    CallContext,
    ConsolidateInput,
    ForgetInput,
    LinkInput,
    PoolWrites,
    RecallInput,
    ReflectInput,
    RelationType,
    RememberInput,
)
from memento.results import FragmentView
from memento.service import MemoryService
from memento.settings import Settings
from memento.storage.protocol import FragmentChanges, SearchFilter

pytestmark = pytest.mark.backends("sqlite", "postgres")

_ALL = SearchFilter()
ADMIN = CallContext(session_id="op-session")  # operator key / loopback: agent_id None
AGENT = CallContext(session_id="a-session", agent_id="agent-a")


@pytest.fixture(params=["read", "write"])
def pool(request: pytest.FixtureRequest, settings: Settings, clock: Clock) -> Iterator[tuple[str, App]]:
    built = build_app(settings.model_copy(update={"shared_pool": request.param}), embedder=HashEmbedder(256), clock=clock)
    if built.keyword_index is not None:
        assert built.keyword_index.wait_ready()
    yield request.param, built
    built.close()


def remember(service: MemoryService, ctx: CallContext, content: str, **kw: Any) -> str:
    payload = {"topic": "conventions", "type": "fact", **kw, "content": content}
    return str(service.remember(RememberInput.model_validate(payload), ctx).id)


def state(service: MemoryService) -> dict[str, Any]:
    """Every pool fragment as the operator sees it, with its version history and edges."""
    rows = service.store.list_fragments(AgentScope("system"), _ALL, 1000)
    return {f.id: (FragmentView.of(f).dump(), service.store.versions(AgentScope("system"), f.id)) for f in sorted(rows, key=lambda f: f.id)}


def refused(action: Any, service: MemoryService) -> Forbidden:
    """`action()` is Forbidden, names the rule, and changes nothing."""
    assert service.settle()  # the embedding worker's vectors are no change of the action's
    before = state(service)
    with pytest.raises(Forbidden) as err:
        action()
    assert "pool" in err.value.message and "nothing changed" in err.value.message
    assert state(service) == before
    return err.value


def test_agent_credentials_change_the_pool_only_as_the_rule_allows(pool: tuple[str, App], clock: Clock) -> None:
    mode, app = pool
    service = app.service
    plain = remember(service, ADMIN, "Deploys need two approvals")
    anchor = remember(service, ADMIN, "Production is eu-west-1", isAnchor=True, topic="regions")
    own = remember(service, AGENT, "Agent A builds with make", topic="agent-a-notes")
    writes = mode == "write"

    # anchored pool fragments: admin-only in both modes, whatever force says
    refused(lambda: service.forget(ForgetInput(id=anchor, force=True), AGENT), service)
    refused(lambda: service.forget(ForgetInput(topic="regions", force=True), AGENT), service)
    refused(lambda: service.amend(AmendInput(id=anchor, content="Production moved"), AGENT), service)
    refused(lambda: service.amend(AmendInput(id=anchor, content="moved", supersedes=True), AGENT), service)
    refused(lambda: service.amend(AmendInput(id=anchor, importance=0.1), AGENT), service)
    refused(lambda: service.link(LinkInput(fromId=anchor, toId=plain), AGENT), service)
    refused(lambda: service.amend(AmendInput(id=plain, isAnchor=True), AGENT), service)
    refused(
        lambda: service.remember(RememberInput(content="planted anchor", topic="t", type="fact", isAnchor=True, agentId="default"), AGENT),
        service,
    )
    # reflect and tool feedback write only the caller's own namespace
    with pytest.raises(Forbidden):
        service.reflect(ReflectInput(summary="into the pool", agentId="default"), AGENT)
    # a pool fragment links only to pool fragments (its linked_to is read by every agent)
    with pytest.raises(Forbidden):
        service.link(LinkInput(fromId=plain, toId=own), AGENT)
    # linking from one's own fragment to the pool changes only one's own fragment
    service.link(LinkInput(fromId=own, toId=plain), AGENT)

    if not writes:
        refused(lambda: service.remember(RememberInput(content="planted", topic="t", type="fact", agentId="default"), AGENT), service)
        refused(lambda: service.amend(AmendInput(id=plain, content="Deploys need one approval"), AGENT), service)
        refused(lambda: service.amend(AmendInput(id=plain, content="One approval", supersedes=True), AGENT), service)
        refused(lambda: service.link(LinkInput(fromId=plain, toId=anchor), AGENT), service)
        refused(lambda: service.forget(ForgetInput(id=plain, force=True), AGENT), service)
    else:
        added = service.remember(RememberInput(content="Shared by agent A", topic="t", type="fact", agentId="default"), AGENT)
        assert added.fragment.agent_id == "default"
        amended = service.amend(AmendInput(id=plain, content="Deploys need one approval"), AGENT)
        assert amended.fragment.content == "Deploys need one approval"
        service.link(LinkInput(fromId=plain, toId=anchor), AGENT)
        successor = service.amend(AmendInput(id=plain, content="Deploys need no approval", supersedes=True), AGENT)
        assert successor.fragment.agent_id == "default"  # a pool fact's successor stays shared
        assert service.forget(ForgetInput(id=successor.id, force=True), AGENT).count == 1

    # the admin may do all of it
    service.amend(AmendInput(id=anchor, importance=0.9), ADMIN)
    assert service.forget(ForgetInput(id=anchor, force=True), ADMIN).count == 1


def test_consolidation_by_an_agent_leaves_pool_rows_it_may_not_write(pool: tuple[str, App], clock: Clock) -> None:
    mode, app = pool
    service = app.service
    long_ago = clock.now - timedelta(days=40)  # warm, and inactive long enough to turn cold
    shared = remember(service, ADMIN, "Old shared convention", type="episode", createdAt=long_ago.isoformat())
    anchored = remember(service, ADMIN, "Old shared anchor", type="episode", isAnchor=True, createdAt=long_ago.isoformat())
    mine = remember(service, AGENT, "Old note of agent A", type="episode", createdAt=long_ago.isoformat())

    def tiers() -> dict[str, str]:
        return {f.id: f.ttl_tier.value for f in service.store.get_many(AgentScope("system"), [shared, anchored, mine])}

    assert set(tiers().values()) == {"warm"}
    service.memory_consolidate(ConsolidateInput(), AGENT)
    after = tiers()
    assert after[mine] == "cold"  # the agent's own rows are consolidated
    assert after[anchored] == "warm"  # anchors never
    assert after[shared] == ("cold" if mode == "write" else "warm")


def test_stores_refuse_pool_writes_the_scope_may_not_make(pool: tuple[str, App]) -> None:
    """Defence in depth: the store checks the rule under its UPDATE and DELETE too."""
    mode, app = pool
    service, store = app.service, app.service.store
    plain = remember(service, ADMIN, "Deploys need two approvals")
    anchor = remember(service, ADMIN, "Production is eu-west-1", isAnchor=True)
    own = remember(service, AGENT, "Agent A builds with make")
    reader = AgentScope("agent-a", PoolWrites.NONE)
    unanchored = AgentScope("agent-a", PoolWrites.UNANCHORED)
    now = service.clock()
    for scope, fid in ((reader, plain), (reader, anchor), (unanchored, anchor)):
        with pytest.raises(Forbidden):
            store.delete(scope, [fid, own])
        with pytest.raises(Forbidden):
            store.update(scope, fid, FragmentChanges(importance=0.1), "agent-a", now)
        with pytest.raises(Forbidden):
            store.add_link(scope, fid, own, RelationType.RELATED, now)
    assert {f.id for f in store.get_many(AgentScope("system"), [plain, anchor, own])} == {plain, anchor, own}
    assert store.update(unanchored, plain, FragmentChanges(importance=0.2), "agent-a", now).importance == 0.2
    assert mode in ("read", "write")


def test_agent_recall_of_the_pool_still_works(pool: tuple[str, App]) -> None:
    _, app = pool
    shared = remember(app.service, ADMIN, "The VPN password rotates monthly", keywords=["vpn"])
    found = app.service.recall(RecallInput(keywords=["vpn"]), AGENT)
    assert [f.id for f in found.fragments] == [shared]


def test_forget_by_topic_takes_the_callers_share_and_keeps_the_rest_of_the_pool(pool: tuple[str, App]) -> None:
    mode, app = pool
    service = app.service
    plain = remember(service, ADMIN, "Deploys need two approvals", topic="deploys")
    anchor = remember(service, ADMIN, "Deploys freeze on Fridays", topic="deploys", isAnchor=True)
    own = remember(service, AGENT, "Agent A deploys with make deploy", topic="deploys")
    result = service.forget(ForgetInput(topic="deploys", force=True), AGENT)
    gone = {own, plain} if mode == "write" else {own}
    assert set(result.deleted) == gone
    assert set(result.kept or ()) == {plain, anchor} - gone and "kept" in (result.message or "")
    left = {f.id for f in service.store.get_many(AgentScope("system"), [plain, anchor, own])}
    assert left == {plain, anchor, own} - gone
