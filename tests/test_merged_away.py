"""Why a memory is not found (MemoryService.explain): one merged away (001 §6.2 consolidation, a
merge proposal) names the memory that holds its text now (storage/merged.py), in the caller's
namespace only, and never once that memory is gone too or the merged text was erased; a
soft-forgotten one says so (and that `restore` brings it back), an expired one when it expired;
one erased or never stored gets the plain message. The faces' own tests (test_entity_mcp.py,
test_rest_api.py) check the message as clients see it."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from memento.errors import NotFound
from memento.models import (
    AmendInput,
    CallContext,
    ForgetInput,
    ForgetMode,
    GraphExploreInput,
    LinkInput,
    RecordInput,
    RememberInput,
    RestoreInput,
)
from memento.service import MemoryService
from memento.storage.merged import absorbed_into, merged_ids

pytestmark = pytest.mark.backends("sqlite", "postgres")


def remember(service: MemoryService, ctx: CallContext, content: str) -> str:
    return service.remember(RememberInput(content=content, topic="ops", type="fact"), ctx).id


def told(service: MemoryService, ctx: CallContext, call: Callable[[], object]) -> NotFound:
    """The error `call` raises, as a face sends it."""
    with pytest.raises(NotFound) as raised:
        call()
    explained = service.explain(raised.value, ctx)
    assert isinstance(explained, NotFound)
    return explained


def test_every_call_naming_a_merged_id_says_where_its_text_went(service: MemoryService, ctx: CallContext) -> None:
    gone = remember(service, ctx, "The nightly backup runs at two")
    kept = remember(service, ctx, "The nightly backup job runs at two")
    other = remember(service, ctx, "Backups are kept for thirty days")
    service.entities.absorb_memory(None, gone, kept, ctx)
    calls: list[Callable[[], object]] = [
        lambda: service.views.get_fragment(gone, ctx),
        lambda: service.amend(AmendInput(id=gone, importance=0.9), ctx),
        lambda: service.link(LinkInput(fromId=gone, toId=other), ctx),
        lambda: service.link(LinkInput(fromId=other, toId=gone), ctx),
        lambda: service.remember(RememberInput(content="Restores are tested monthly", topic="ops", type="fact", linkedTo=[gone]), ctx),
        lambda: service.forget(ForgetInput(id=gone), ctx),
        lambda: service.graph_explore(GraphExploreInput(startId=gone), ctx),
    ]
    for call in calls:
        error = told(service, ctx, call)
        assert error.merged_into == {gone: kept}, error.message
        assert f"{gone} was merged into {kept}" in error.message and f"use {kept}" in error.message
    assert service.views.get_fragment(kept, ctx).id == kept  # the hint names a memory that is there


def test_a_chain_of_merges_points_to_the_last_survivor(service: MemoryService, ctx: CallContext) -> None:
    first = remember(service, ctx, "Deploys freeze on Fridays")
    second = remember(service, ctx, "Deploys are frozen on Fridays")
    third = remember(service, ctx, "No deploys on Fridays")
    service.entities.absorb_memory(None, first, second, ctx)
    service.entities.absorb_memory(None, second, third, ctx)
    error = told(service, ctx, lambda: service.amend(AmendInput(id=first, importance=0.2), ctx))
    assert error.merged_into == {first: third}


def test_another_namespace_and_a_forgotten_survivor_are_told_nothing(service: MemoryService) -> None:
    ctx = CallContext(agent_id="owner")  # its own namespace (the default one is the pool every agent reads)
    gone = remember(service, ctx, "The VPN certificate expires in March")
    kept = remember(service, ctx, "The VPN certificate expires in March next year")
    service.entities.absorb_memory(None, gone, kept, ctx)
    stranger = CallContext(agent_id="someone-else")
    error = told(service, stranger, lambda: service.amend(AmendInput(id=gone, importance=0.2), stranger))
    assert error.merged_into == {} and kept not in error.message
    service.forget(ForgetInput(id=kept), ctx)  # soft: hidden, so it is no answer either
    error = told(service, ctx, lambda: service.amend(AmendInput(id=gone, importance=0.2), ctx))
    assert error.merged_into == {} and "merged" not in error.message


def test_erasing_the_merged_text_erases_the_hint(service: MemoryService, ctx: CallContext) -> None:
    gone = remember(service, ctx, "The on-call phone is in the second drawer")
    kept = remember(service, ctx, "The on-call phone lives in the second drawer")
    service.entities.absorb_memory(None, gone, kept, ctx)
    assert service.forget(ForgetInput(id=gone, mode=ForgetMode.HARD), ctx).receipt is not None
    error = told(service, ctx, lambda: service.amend(AmendInput(id=gone, importance=0.2), ctx))
    assert error.merged_into == {} and kept not in error.message


def test_other_errors_pass_through_unchanged(service: MemoryService, ctx: CallContext) -> None:
    error = told(service, ctx, lambda: service.amend(AmendInput(id="frag-0000000000000000", importance=0.2), ctx))
    assert error.merged_into == {} and error.message == "fragment 'frag-0000000000000000' not found"


def test_the_notes_are_read_exactly() -> None:
    assert merged_ids("merged:frag-a") == ["frag-a"]
    assert merged_ids("merged:frag-a (source chat)") == ["frag-a"]
    assert merged_ids("from frag-b: merged:frag-a (source chat)") == ["frag-a"]
    assert merged_ids("from frag-b") == [] and merged_ids(None) == []
    rows = [("merged:frag-a1", "frag-x", 1), ("from frag-b: merged:frag-a", "frag-z", 3), ("merged:frag-a", "frag-b", 2)]
    assert absorbed_into(["frag-a"], rows) == {"frag-a": "frag-z"}  # the newest trail; frag-a1 is another id
    assert absorbed_into(["frag-a"], [("merged:frag-a", "frag-a", 1)]) == {}  # never itself


def test_a_forgotten_or_expired_memory_is_said_to_be(service: MemoryService, ctx: CallContext) -> None:
    forgotten = remember(service, ctx, "The old wiki lives at wiki-old.example")
    service.forget(ForgetInput(id=forgotten), ctx)
    error = told(service, ctx, lambda: service.amend(AmendInput(id=forgotten, importance=0.2), ctx))
    assert f"{forgotten} was forgotten at " in error.message and "`restore` brings it back" in error.message
    service.restore(RestoreInput(id=forgotten), ctx)
    assert service.views.get_fragment(forgotten, ctx).id == forgotten
    soon = datetime.now(UTC) + timedelta(seconds=1)
    expiring = service.remember(
        RememberInput(
            content="The demo token works until the end of the call", topic="ops", type="fact", record=RecordInput(expiresAt=soon)
        ),
        ctx,
    ).id
    time.sleep(max(0.0, (soon - datetime.now(UTC)).total_seconds()) + 0.2)  # stores hide expired rows by the wall clock
    error = told(service, ctx, lambda: service.views.get_fragment(expiring, ctx))
    assert f"{expiring} expired at {soon.isoformat(timespec='seconds')}" in error.message
    erased = remember(service, ctx, "A memory erased for good")
    service.forget(ForgetInput(id=erased, mode=ForgetMode.HARD), ctx)
    error = told(service, ctx, lambda: service.amend(AmendInput(id=erased, importance=0.2), ctx))
    assert error.message == f"fragment {erased!r} not found"  # nothing of it is left to tell
