"""The eleven operations, as specified by seed 000 §6."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from memento.errors import Conflict, Forbidden, InvalidArgument, NotFound
from memento.factory import TokenCounter
from memento.models import (
    AgentScope,
    AmendInput,
    CallContext,
    ContextInput,
    ForgetInput,
    ForgetMode,
    GraphExploreInput,
    LinkInput,
    MemoryStatsInput,
    RecallInput,
    ReflectInput,
    RelationType,
    RememberInput,
    ToolFeedbackInput,
)
from memento.results import wire_text
from memento.service import MemoryService
from memento.storage.protocol import SearchFilter

pytestmark = pytest.mark.backends("sqlite", "postgres")


def remember(service: MemoryService, ctx: CallContext, content: str, **kw: Any) -> str:
    payload = {"topic": "general", "type": "fact", **kw, "content": content}
    return str(service.remember(RememberInput.model_validate(payload), ctx).id)


def recall_ids(service: MemoryService, ctx: CallContext, **kw: Any) -> list[str]:
    return [f.id for f in service.recall(RecallInput.model_validate(kw), ctx).fragments]


def test_remember_returns_id_and_created(service: MemoryService, ctx: CallContext) -> None:
    result = service.remember(RememberInput(content="Postgres runs on port 5433", topic="db", type="fact"), ctx)
    assert result.created is True
    assert result.id.startswith("frag-")
    assert result.fragment.importance == 0.5 and result.fragment.ttl_tier == "warm"


def test_duplicate_returns_existing_id_with_created_false(service: MemoryService, ctx: CallContext) -> None:
    first = service.remember(RememberInput(content="Deploys happen on Fridays", topic="ops", type="fact"), ctx)
    again = service.remember(RememberInput(content="Deploys happen on Fridays", topic="other", type="decision"), ctx)
    assert again.created is False and again.id == first.id
    assert again.message is not None and "duplicate" in again.message
    assert service.memory_stats(MemoryStatsInput(), ctx).total == 1


def test_redacted_variants_are_duplicates(service: MemoryService, ctx: CallContext) -> None:
    a = remember(service, ctx, "login with password: alpha")
    b = remember(service, ctx, "login with password: beta")
    assert a == b


def test_pii_never_reaches_the_store(service: MemoryService, ctx: CallContext, app: Any) -> None:
    fid = remember(service, ctx, "비밀번호: s3cret 연락처 010-1234-5678 mail kim@example.com key sk-" + "x" * 40)
    raw = app.store.get_many(AgentScope("system"), [fid])[0].content
    for secret in ("s3cret", "010-1234-5678", "kim@example.com", "sk-xxxx"):
        assert secret not in raw
    assert "[REDACTED_PWD]" in raw and "[REDACTED_PHONE]" in raw and "[REDACTED_EMAIL]" in raw and "[REDACTED_API_KEY]" in raw


def test_korean_stems_are_found_by_keyword_and_text(service: MemoryService, ctx: CallContext) -> None:
    db = remember(service, ctx, "데이터베이스는 느리다")
    meeting = remember(service, ctx, "회의가 길었다")
    assert recall_ids(service, ctx, keywords=["데이터베이스"])[0] == db
    assert recall_ids(service, ctx, keywords=["회의"])[0] == meeting
    assert recall_ids(service, ctx, text="회의")[0] == meeting
    assert recall_ids(service, ctx, text="데이터베이스")[0] == db


def test_english_word_forms_match(service: MemoryService, ctx: CallContext) -> None:
    target = remember(service, ctx, "Caroline is researching adoption agencies")
    remember(service, ctx, "Melanie painted a sunrise over the lake")
    assert recall_ids(service, ctx, text="What did Caroline research?")[0] == target


def test_questions_with_punctuation_and_quotes_never_break_recall(service: MemoryService, ctx: CallContext) -> None:
    target = remember(service, ctx, 'The error "ECONNRESET" appears at 3:15 on port 8080')
    for query in ['what is "ECONNRESET"?', "port 8080 AND (3:15)", "NEAR(", '"""', "*", "-x OR"]:
        result = service.recall(RecallInput(text=query), ctx)
        assert isinstance(result.fragments, list)
    assert recall_ids(service, ctx, text='what is "ECONNRESET"?')[0] == target


def test_topic_and_type_filters_apply(service: MemoryService, ctx: CallContext) -> None:
    a = remember(service, ctx, "redis cache eviction policy is allkeys-lru", topic="cache", type="decision")
    b = remember(service, ctx, "redis cache warmed at boot", topic="boot", type="fact")
    assert recall_ids(service, ctx, text="redis cache", topic="cache") == [a]
    assert recall_ids(service, ctx, text="redis cache", type="fact") == [b]


def test_threshold_filters_semantic_results_but_never_keyword_results(service: MemoryService, ctx: CallContext) -> None:
    hit = remember(service, ctx, "kubernetes pod restarts after OOM", keywords=["kubernetes"])
    remember(service, ctx, "sourdough needs a warm kitchen")
    # threshold 1.0 removes every semantic-only result; the keyword match stays.
    ids = recall_ids(service, ctx, keywords=["kubernetes"], text="unrelated words entirely", threshold=1.0)
    assert ids == [hit]
    semantic_only = service.recall(RecallInput(text="completely different vocabulary", threshold=1.0), ctx)
    assert semantic_only.fragments == []


def test_token_budget_truncates(service: MemoryService, ctx: CallContext) -> None:
    for i in range(10):
        remember(service, ctx, f"alpha note number {i} " + "filler words " * 10)
    result = service.recall(RecallInput(text="alpha note", tokenBudget=250), ctx)
    assert result.truncated is True
    assert 0 < result.count < 10
    # the budget bounds the whole result as sent, and totalTokens reports it (within 5%)
    sent = TokenCounter().count(wire_text(result.dump()))
    assert sent <= 250 and result.total_tokens <= 250
    assert abs(result.total_tokens - sent) <= 0.05 * sent


def test_include_links_appends_one_hop_neighbours(service: MemoryService, ctx: CallContext) -> None:
    error = remember(service, ctx, "build fails with missing libssl", type="error")
    fix = remember(service, ctx, "install openssl headers before pip install")
    other = remember(service, ctx, "unrelated neighbour via part_of")
    service.link(LinkInput(fromId=error, toId=fix, relationType="resolved_by"), ctx)
    service.link(LinkInput(fromId=error, toId=other, relationType="part_of"), ctx)
    result = service.recall(RecallInput(keywords=["libssl"]), ctx)
    linked = [f for f in result.fragments if f.linked]
    assert [f.id for f in linked] == [fix]  # part_of is not followed by default
    assert linked[0].via is not None and linked[0].via.dump() == {"from": error, "to": fix, "relation": "resolved_by"}
    only_part = service.recall(RecallInput(keywords=["libssl"], linkRelationType="part_of"), ctx)
    assert [f.id for f in only_part.fragments if f.linked] == [other]
    none = service.recall(RecallInput(keywords=["libssl"], includeLinks=False), ctx)
    assert not any(f.linked for f in none.fragments)


def test_amend_archives_version_and_keeps_id_and_links(service: MemoryService, ctx: CallContext, app: Any) -> None:
    a = remember(service, ctx, "the API rate limit is 100 rps")
    b = remember(service, ctx, "rate limit set in nginx config")
    service.link(LinkInput(fromId=a, toId=b), ctx)
    result = service.amend(AmendInput(id=a, content="the API rate limit is 250 rps", importance=0.7), ctx)
    assert result.id == a
    assert result.fragment.content == "the API rate limit is 250 rps"
    assert result.fragment.linked_to == [b]
    versions = app.store.versions(app.service._scope(None, ctx), a)
    assert versions[0]["content"] == "the API rate limit is 100 rps" and versions[0]["importance"] == 0.5
    assert recall_ids(service, ctx, text="250 rps")[0] == a
    scope = app.service._scope(None, ctx)
    from memento.storage.protocol import SearchFilter

    assert a not in [h.id for h in app.store.text_search(scope, ["100"], SearchFilter(), 10)]


def test_supersedes_creates_edge_and_lowers_original_importance(service: MemoryService, ctx: CallContext, app: Any) -> None:
    old = remember(service, ctx, "standup is at 9:00", importance=0.6)
    result = service.amend(AmendInput(id=old, content="standup is at 9:30", supersedes=True), ctx)
    new = result.id
    assert new != old
    assert result.original is not None and result.original.importance == pytest.approx(0.3)
    edges = app.store.neighbours(service._scope(None, ctx), [old], [RelationType.SUPERSEDED_BY], 10)
    assert [(link.from_id, link.to_id, fragment.id) for link, fragment in edges] == [(old, new, new)]
    assert service.recall(RecallInput(text="standup"), ctx).fragments[0].id == new


def test_forget_permanent_needs_force(service: MemoryService, ctx: CallContext) -> None:
    pref = remember(service, ctx, "user prefers tabs over spaces", type="preference")
    with pytest.raises(Forbidden):
        service.forget(ForgetInput(id=pref), ctx)
    assert recall_ids(service, ctx, keywords=["tabs"]) == [pref]
    assert service.forget(ForgetInput(id=pref, force=True), ctx).deleted == [pref]
    assert recall_ids(service, ctx, keywords=["tabs"]) == []


def test_forget_by_topic_is_all_or_nothing(service: MemoryService, ctx: CallContext) -> None:
    remember(service, ctx, "temp fact one", topic="scratch")
    remember(service, ctx, "temp preference two", topic="scratch", type="preference")
    with pytest.raises(Forbidden):
        service.forget(ForgetInput(topic="scratch"), ctx)
    assert service.memory_stats(MemoryStatsInput(), ctx).total == 2
    assert service.forget(ForgetInput(topic="scratch", force=True), ctx).count == 2


def test_forget_removes_from_every_index(service: MemoryService, ctx: CallContext, app: Any) -> None:
    a = remember(service, ctx, "ephemeral zebra fact")
    b = remember(service, ctx, "points at the zebra")
    service.link(LinkInput(fromId=b, toId=a), ctx)
    service.forget(ForgetInput(id=a, mode=ForgetMode.HARD), ctx)
    assert recall_ids(service, ctx, text="ephemeral zebra", includeLinks=True) == [b]
    assert service.recall(RecallInput(text="zebra"), ctx).fragments[0].linked_to == []
    system = AgentScope("system")
    assert app.store.neighbours(system, [a, b], list(RelationType), 10) == []
    assert [h.id for h in app.store.keyword_search(system, ["ephemeral", "zebra"], SearchFilter(), 10)] == [b]
    assert app.store.stats(system)["links"] == 0


def test_unknown_ids_are_not_found_and_change_nothing(service: MemoryService, ctx: CallContext) -> None:
    a = remember(service, ctx, "a real fragment")
    assert service.settle()
    before = service.memory_stats(MemoryStatsInput(), ctx)
    with pytest.raises(NotFound):
        service.forget(ForgetInput(id="frag-0000000000000000"), ctx)
    with pytest.raises(NotFound):
        service.amend(AmendInput(id="frag-0000000000000000", content="x"), ctx)
    with pytest.raises(NotFound):
        service.link(LinkInput(fromId=a, toId="frag-0000000000000000"), ctx)
    with pytest.raises(NotFound):
        service.graph_explore(GraphExploreInput(startId="frag-0000000000000000"), ctx)
    with pytest.raises(NotFound):
        service.remember(RememberInput(content="linked to nothing", topic="t", type="fact", linkedTo=["frag-0000000000000000"]), ctx)
    assert service.memory_stats(MemoryStatsInput(), ctx) == before


def test_invalid_combinations_are_refused(service: MemoryService, ctx: CallContext) -> None:
    a = remember(service, ctx, "one")
    with pytest.raises(InvalidArgument):
        service.forget(ForgetInput(), ctx)
    with pytest.raises(InvalidArgument):
        service.forget(ForgetInput(id=a, topic="general"), ctx)
    with pytest.raises(InvalidArgument):
        service.amend(AmendInput(id=a), ctx)
    with pytest.raises(InvalidArgument):
        service.link(LinkInput(fromId=a, toId=a), ctx)
    b = remember(service, ctx, "two")
    with pytest.raises(Conflict):
        service.amend(AmendInput(id=b, content="one"), ctx)


def test_context_returns_core_memory_and_session_working_memory(service: MemoryService) -> None:
    ctx = CallContext(session_id="s-ctx")
    pref = remember(service, ctx, "answer in Korean", type="preference")
    err = remember(service, ctx, "flaky test in CI: retry once", type="error")
    remember(service, ctx, "an ordinary fact")
    work = remember(service, ctx, "currently editing app.py", scope="session")
    other = remember(service, CallContext(session_id="s-other"), "someone else's scratch", scope="session")
    result = service.context(ContextInput(), ctx)
    assert [f.id for f in result.core_memory] == [pref, err]
    assert [f.id for f in result.working_memory] == [work]
    assert other not in {f.id for f in result.working_memory} and "currently editing app.py" in [f.content for f in result.working_memory]
    # working memory is visible to its own session's recall only, and gone when the session ends
    assert work in recall_ids(service, ctx, text="editing app.py")
    assert work not in recall_ids(service, CallContext(session_id="s-other"), text="editing app.py")
    assert service.end_session("s-ctx", ctx) == 1
    assert service.context(ContextInput(), ctx).working_memory == []


def test_session_scope_without_a_session_is_refused(service: MemoryService) -> None:
    with pytest.raises(InvalidArgument):
        service.remember(RememberInput(content="x", topic="t", type="fact", scope="session"), CallContext())


def test_reflect_creates_typed_fragments_and_task_feedback(service: MemoryService, ctx: CallContext, app: Any) -> None:
    result = service.reflect(
        ReflectInput(
            summary="Migrated the billing service to Postgres 16",
            sessionId="s-42",
            decisions=["keep pgbouncer in transaction mode"],
            errorsResolved=["fixed: prepared statements broke under pgbouncer; disabled them"],
            newProcedures=["run vacuum analyze after bulk loads"],
            openQuestions=["should replicas be synchronous?"],
            taskEffectiveness={"overall_success": True, "tool_highlights": ["recall: found the old error"], "tool_pain_points": []},
        ),
        ctx,
    )
    assert [f.type for f in result.fragments] == ["fact", "decision", "error", "procedure", "fact"]
    rows = app.store.task_feedback("s-42")
    assert len(rows) == 1 and rows[0]["overall_success"] == 1
    assert recall_ids(service, ctx, text="pgbouncer transaction mode")[0] == result.fragments[1].id


def test_tool_feedback_is_recorded(service: MemoryService, ctx: CallContext, app: Any) -> None:
    result = service.tool_feedback(ToolFeedbackInput(toolName="recall", relevant=True, sufficient=False, suggestion="more"), ctx)
    row = app.store.tool_feedback(result.id)
    assert row["tool_name"] == "recall" and row["sufficient"] is False and row["session_id"] == "session-1"
    assert row["trigger_type"] == "voluntary" and row["relevant"] is True and row["suggestion"] == "more"


def test_graph_explore_follows_causal_edges(service: MemoryService, ctx: CallContext) -> None:
    err = remember(service, ctx, "deploy failed: disk full", type="error")
    cause = remember(service, ctx, "log rotation was disabled")
    fix = remember(service, ctx, "re-enabled logrotate and cleaned /var/log")
    unrelated = remember(service, ctx, "disk is an NVMe")
    deeper = remember(service, ctx, "logrotate config was lost in the image rebuild")
    service.link(LinkInput(fromId=err, toId=cause, relationType="caused_by"), ctx)
    service.link(LinkInput(fromId=err, toId=fix, relationType="resolved_by"), ctx)
    service.link(LinkInput(fromId=err, toId=unrelated, relationType="related"), ctx)
    service.link(LinkInput(fromId=cause, toId=deeper, relationType="caused_by"), ctx)
    one = service.graph_explore(GraphExploreInput(startId=err), ctx)
    assert {n.id for n in one.nodes} == {cause, fix}
    assert {(e.from_, e.to, e.relation) for e in one.edges} == {(err, cause, "caused_by"), (err, fix, "resolved_by")}
    two = service.graph_explore(GraphExploreInput(startId=err, depth=2), ctx)
    assert {n.id for n in two.nodes} == {cause, fix, deeper}


def test_memory_stats_counts_tiers_types_and_coverage(service: MemoryService, ctx: CallContext) -> None:
    remember(service, ctx, "pref", type="preference")
    remember(service, ctx, "err", type="error", importance=0.7)
    remember(service, ctx, "low", importance=0.2)
    assert service.settle()
    stats = service.memory_stats(MemoryStatsInput(), ctx)
    assert stats.total == 3
    assert stats.by_tier == {"hot": 1, "warm": 0, "cold": 1, "permanent": 1}
    assert stats.by_type["preference"] == 1 and stats.by_type["error"] == 1
    assert stats.embedding_coverage == 1.0 and stats.search_mode == "hybrid" and stats.embeddings_pending == 0


def test_agents_are_isolated_but_share_the_default_namespace(service: MemoryService) -> None:
    a, b, anon = CallContext(), CallContext(), CallContext()
    mine = remember(service, a, "agent A secret plan", agentId="agent-a")
    shared = remember(service, anon, "shared convention: use UTC everywhere")
    assert mine not in recall_ids(service, b, text="agent A secret plan", agentId="agent-b")
    assert recall_ids(service, b, text="use UTC", agentId="agent-b")[0] == shared
    assert recall_ids(service, a, text="secret plan", agentId="agent-a")[0] == mine
    with pytest.raises(NotFound):
        service.forget(ForgetInput(id=mine, agentId="agent-b"), b)
    with pytest.raises(NotFound):
        service.amend(AmendInput(id=mine, content="hijacked", agentId="agent-b"), b)
    with pytest.raises(NotFound):
        service.link(LinkInput(fromId=shared, toId=mine, agentId="agent-b"), b)
    assert service.memory_stats(MemoryStatsInput(agentId="agent-b"), b).total == 1
    assert recall_ids(service, a, text="secret plan", agentId="agent-a")[0] == mine


def test_credential_agent_cannot_be_widened_by_argument(service: MemoryService) -> None:
    with pytest.raises(Forbidden):
        service.recall(RecallInput(text="x", agentId="agent-b"), CallContext(agent_id="agent-a"))


def test_a_read_only_credential_can_search_but_not_write(service: MemoryService) -> None:
    writer = CallContext(agent_id="agent-r")
    reader = CallContext(agent_id="agent-r", read_only=True)
    fid = remember(service, writer, "read-only keys may still recall this")
    assert recall_ids(service, reader, text="recall this")[0] == fid
    assert service.context(ContextInput(), reader).core_memory == []
    calls: list[Callable[[], object]] = [
        lambda: service.remember(RememberInput(content="nope", topic="t", type="fact"), reader),
        lambda: service.forget(ForgetInput(id=fid), reader),
        lambda: service.amend(AmendInput(id=fid, content="changed"), reader),
        lambda: service.link(LinkInput(fromId=fid, toId=fid), reader),
        lambda: service.reflect(ReflectInput(summary="s"), reader),
        lambda: service.tool_feedback(ToolFeedbackInput(toolName="recall", relevant=True, sufficient=True), reader),
    ]
    for call in calls:
        with pytest.raises(Forbidden):
            call()
    assert service.memory_stats(MemoryStatsInput(), reader).total == 1


def test_a_superseded_memory_ranks_below_its_successor_and_says_so(service: MemoryService, ctx: CallContext) -> None:
    """The old rule stays findable, marked, and ranks below the rule that replaced it."""
    old = remember(service, ctx, "Deploys happen on Fridays after the standup", importance=0.99)
    new = service.amend(AmendInput(id=old, content="Deploys happen on Tuesdays after the standup", supersedes=True), ctx).id
    found = service.recall(RecallInput(text="when do deploys happen after the standup", includeLinks=False), ctx).fragments
    order = [f.id for f in found]
    assert order.index(new) < order.index(old)
    marked = next(f for f in found if f.id == old)
    assert marked.superseded_by == new and "superseded by" in marked.recall_reason
    assert next(f for f in found if f.id == new).superseded_by is None
    wire = service.recall(RecallInput(text="deploys after the standup", includeLinks=False), ctx).dump()
    assert {f["id"]: f.get("supersededBy") for f in wire["fragments"]}[old] == new
