"""Seed 003's context call on the service, on both backends: the parts, the `include` switches,
what is never shown (completed items, expired skips, another namespace's records) and the token
budget (what is left out is counted, the identity is cut rather than dropped)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from conftest import Clock

from memento.models import CallContext
from memento.protocol_face.context import ContextCallInput, ContextCallResult
from memento.protocol_face.identity import IdentityUpdateInput
from memento.protocol_face.memory_models import StoreMemoryInput
from memento.protocol_face.skips import SkipAddInput
from memento.protocol_face.workmem_models import ItemCreateInput, ItemFields
from memento.service import MemoryService

pytestmark = pytest.mark.backends("sqlite", "postgres")

A = CallContext(agent_id="agent-a")
B = CallContext(agent_id="agent-b")


def context(service: MemoryService, ctx: CallContext = A, **fields: Any) -> ContextCallResult:
    return service.protocol.context(ContextCallInput.model_validate(fields), ctx)


def a_workspace(service: MemoryService, clock: Clock, ctx: CallContext = A) -> None:
    face = service.protocol
    tomorrow = (clock.now + timedelta(days=1)).date().isoformat()
    face.items.create(ItemCreateInput(category="active_work", title="Ship the export", priority=3, next_action="write docs"), ctx)
    face.items.create(ItemCreateInput(category="standing_decision", title="Squash merges only", priority=9), ctx)
    done = face.items.create(ItemCreateInput(category="active_work", title="Old spike"), ctx)
    face.items.update(done.id, ItemFields(status="completed"), ctx)
    paused = face.items.create(ItemCreateInput(category="waiting_for", title="Design review"), ctx)
    face.items.update(paused.id, ItemFields(status="paused"), ctx)
    face.skips.add(SkipAddInput(item="flaky nightly benchmark", reason="the runner is being replaced", expires=tomorrow), ctx)
    face.memories.store(StoreMemoryInput(content="The nightly benchmark runs on runner-7 at 02:00", type="fact"), ctx)
    face.identity.update(IdentityUpdateInput(crystal="I keep the release train on time and never merge unreviewed code."), ctx)


def test_every_part_for_a_message(service: MemoryService, clock: Clock) -> None:
    a_workspace(service, clock)
    found = context(service, message="should I look into the flaky nightly benchmark on runner-7?")
    assert found.working_memory is not None and found.memories is not None and found.skip_matches is not None
    assert [i.title for i in found.working_memory.items] == ["Squash merges only", "Ship the export", "Design review"]
    assert found.working_memory.total_active == 3  # active and paused; the completed item never
    assert [s.item for s in found.skip_matches] == ["flaky nightly benchmark"] and found.skip_matches[0].match == "words"
    assert any("runner-7" in m.content for m in found.memories.matches)
    assert found.identity is not None and "release train" in found.identity
    assert found.meta.namespace == "agent-a" and not found.meta.truncated and found.meta.tokens > 0


def test_include_picks_the_parts(service: MemoryService, clock: Clock) -> None:
    a_workspace(service, clock)
    only = context(service, message="flaky nightly benchmark", include=["skip_list"])
    assert only.skip_matches and only.working_memory is None and only.memories is None and only.identity is None
    two = context(service, message="flaky nightly benchmark", include=["identity", "working_memory"])
    assert two.identity and two.working_memory and two.skip_matches is None and two.memories is None
    with pytest.raises(ValueError):
        ContextCallInput.model_validate({"include": ["everything"]})


def test_without_a_message_no_memories_or_warnings_and_expired_skips_never(service: MemoryService, clock: Clock) -> None:
    a_workspace(service, clock)
    quiet = context(service)
    assert quiet.memories is not None and quiet.memories.matches == [] and quiet.skip_matches == []
    clock.now += timedelta(days=3)  # the skip entry has expired
    later = context(service, message="flaky nightly benchmark")
    assert later.skip_matches == []


def test_another_namespace_sees_none_of_it(service: MemoryService, clock: Clock) -> None:
    a_workspace(service, clock)
    other = context(service, B, message="flaky nightly benchmark on runner-7 release train")
    assert other.working_memory is not None and other.working_memory.items == [] and other.working_memory.total_active == 0
    assert other.skip_matches == [] and other.identity is None
    assert other.memories is not None and other.memories.matches == []


def test_the_budget_keeps_warnings_and_identity_first_and_counts_what_it_leaves_out(service: MemoryService, clock: Clock) -> None:
    a_workspace(service, clock)
    for n in range(30):
        service.protocol.items.create(ItemCreateInput(category="session_note", title=f"note number {n} " + "detail " * 20), A)
    tight = context(service, message="flaky nightly benchmark runner-7", token_budget=300)
    assert tight.meta.truncated and tight.meta.tokens <= 300
    assert tight.skip_matches and tight.identity and "release train" in tight.identity
    assert tight.working_memory is not None and tight.working_memory.total_active == 33
    assert len(tight.working_memory.items) < 33 and tight.meta.omitted["working_memory"] >= 1
    roomy = context(service, message="flaky nightly benchmark runner-7", token_budget=100_000)
    assert not roomy.meta.truncated and roomy.working_memory is not None and len(roomy.working_memory.items) == 33


def test_a_long_identity_is_cut_not_dropped(service: MemoryService, clock: Clock) -> None:
    long = "I am a careful agent. " * 300
    service.protocol.identity.update(IdentityUpdateInput(crystal=long), A)
    cut = context(service, include=["identity"], token_budget=200)
    assert cut.identity is not None and cut.identity.endswith("…") and len(cut.identity) < len(long)
    assert cut.meta.tokens <= 200 and cut.meta.truncated
