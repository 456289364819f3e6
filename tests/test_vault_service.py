"""Seed 002's face through VaultService on both backends: upsert on (scope, key) with the previous
state archived, tags with ALL semantics, the bulk-vault-prune refusal, the §3.2 ranking with and
without a query_embedding, FTS5 query syntax (and any string: a result or a clean refusal), a
keyed memory as an ordinary memory (recalled by `recall`, counted by `memory_stats`, two keys
holding the same text), isolation between agents and read-only credentials. The MCP face, the
session identity and the resources: tests/test_vault_mcp.py."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from conftest import Clock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memento.errors import Forbidden, InvalidArgument, InvalidParams
from memento.models import CallContext, MemoryStatsInput, RecallInput
from memento.service import MemoryService
from memento.vault_models import CommitMemoryInput, PruneMemoryInput, SearchMemoriesInput, SearchResult
from memento.vault_query import parse

pytestmark = pytest.mark.backends("sqlite", "postgres")


def commit(service: MemoryService, ctx: CallContext, scope: str, key: str, content: str, **kw: Any) -> None:
    out = service.vault.commit(CommitMemoryInput.model_validate({"scope": scope, "key": key, "content": content, **kw}), ctx)
    assert out.committed is True and out.key == key and out.scope == scope


def search(service: MemoryService, ctx: CallContext, query: str, **kw: Any) -> SearchResult:
    return service.vault.search(SearchMemoriesInput.model_validate({"query": query, **kw}), ctx)


def keys(result: SearchResult) -> list[str]:
    return [h.key for h in result.results]


def prune(service: MemoryService, ctx: CallContext, scope: str, **kw: Any) -> int:
    return service.vault.prune(PruneMemoryInput.model_validate({"scope": scope, **kw}), ctx).pruned_count


def test_commit_upserts_on_scope_and_key_and_archives_the_previous_state(service: MemoryService, ctx: CallContext, clock: Clock) -> None:
    commit(service, ctx, "vault", "user_preference_language", "User prefers Python examples.", tags=["preference"])
    first = service.vault.get("user_preference_language", ctx)
    assert first.created_at == first.updated_at and first.scope == "vault"
    clock.now += timedelta(minutes=5)
    commit(service, ctx, "vault", "user_preference_language", "User prefers TypeScript examples.", tags=["preference", "coding"])
    now = service.vault.get("user_preference_language", ctx)
    assert now.content == "User prefers TypeScript examples." and now.tags == ["preference", "coding"]
    assert now.created_at == first.created_at and now.updated_at > first.updated_at
    (f,) = service.store.recent(service._scope(None, ctx), _keyed(), 10)
    assert [v["content"] for v in service.store.versions(service._scope(None, ctx), f.id)] == ["User prefers Python examples."]
    commit(service, ctx, "session", "user_preference_language", "only for this session")  # another scope: another memory
    assert sorted(h.scope for h in search(service, ctx, "user_preference_language").results) == ["session", "vault"]
    assert [h.scope for h in search(service, ctx, "user_preference_language", scope="vault").results] == ["vault"]


def _keyed() -> Any:
    from memento.storage.protocol import SearchFilter

    return SearchFilter(keyed=True)


def test_the_full_text_is_kept_and_returned(service: MemoryService, ctx: CallContext) -> None:
    long = "The deployment runbook: " + "step " * 100 + "then verify the canary."
    commit(service, ctx, "vault", "runbook", long)
    assert service.vault.get("runbook", ctx).content == long
    assert search(service, ctx, "canary").results[0].content == long


def test_contents_are_masked(service: MemoryService, ctx: CallContext) -> None:
    commit(service, ctx, "vault", "contact", "Reach the owner at jane.doe@example.com for access.")
    assert "jane.doe@example.com" not in service.vault.get("contact", ctx).content


def test_two_keys_may_hold_the_same_text(service: MemoryService, ctx: CallContext) -> None:
    commit(service, ctx, "vault", "a", "The build uses Bazel.")
    commit(service, ctx, "vault", "b", "The build uses Bazel.")
    assert sorted(keys(search(service, ctx, "bazel"))) == ["a", "b"]
    # and a 000 memory of that text is a third record
    from memento.models import RememberInput

    out = service.remember(RememberInput(content="The build uses Bazel.", topic="build", type="fact"), ctx)
    assert out.created is True
    assert service.memory_stats(MemoryStatsInput(), ctx).total == 3


def test_a_keyed_memory_is_recalled_and_counted(service: MemoryService, ctx: CallContext) -> None:
    commit(service, ctx, "vault", "db_choice", "We chose PostgreSQL for the ledger service.")
    found = service.recall(RecallInput(text="ledger PostgreSQL"), ctx)
    assert any("PostgreSQL" in f.content for f in found.fragments)
    by_key = service.recall(RecallInput(keywords=["db_choice"]), ctx)
    assert any("PostgreSQL" in f.content for f in by_key.fragments)
    assert service.memory_stats(MemoryStatsInput(), ctx).total == 1


def test_tags_filter_with_all_semantics(service: MemoryService, ctx: CallContext) -> None:
    commit(service, ctx, "vault", "one", "alpha note", tags=["x", "y"])
    commit(service, ctx, "vault", "two", "alpha note too", tags=["x"])
    assert sorted(keys(search(service, ctx, "alpha", tags=["x"]))) == ["one", "two"]
    assert keys(search(service, ctx, "alpha", tags=["x", "y"])) == ["one"]
    assert keys(search(service, ctx, "alpha", tags=["X", "Y"])) == ["one"]  # tags compare without case
    assert keys(search(service, ctx, "", tags=["y"])) == ["one"]  # a blank query: by tags alone
    assert prune(service, ctx, "vault", tags=["x", "y"]) == 1
    assert keys(search(service, ctx, "alpha")) == ["two"]


def test_bulk_vault_prune_is_refused_and_deletes_nothing(service: MemoryService, ctx: CallContext) -> None:
    commit(service, ctx, "vault", "keep", "vault memory")
    commit(service, ctx, "session", "temp", "session memory")
    for scope in ("vault", "all"):
        with pytest.raises(InvalidParams) as refused:
            prune(service, ctx, scope)
        assert refused.value.message == "Bulk vault prune requires at least one filter."
    assert sorted(keys(search(service, ctx, "memory"))) == ["keep", "temp"]
    assert prune(service, ctx, "session") == 1  # the session may be cleared without a filter
    assert keys(search(service, ctx, "memory")) == ["keep"]


def test_prune_by_key_and_by_age(service: MemoryService, ctx: CallContext, clock: Clock) -> None:
    commit(service, ctx, "vault", "old", "first note")
    clock.now += timedelta(days=2)
    cutoff = clock().isoformat()
    clock.now += timedelta(days=1)
    commit(service, ctx, "vault", "new", "second note")
    assert prune(service, ctx, "vault", older_than=cutoff) == 1
    assert keys(search(service, ctx, "note")) == ["new"]
    assert prune(service, ctx, "all", key="missing") == 0
    assert prune(service, ctx, "all", key="new") == 1
    with pytest.raises(ValueError):
        PruneMemoryInput.model_validate({"scope": "vault", "older_than": "yesterday"})


def test_ranking_is_bm25_normalised_and_blends_agent_vectors(service: MemoryService, ctx: CallContext) -> None:
    commit(service, ctx, "vault", "k1", "redis cache eviction policy", embedding=[1.0, 0.0, 0.0])
    commit(service, ctx, "vault", "k2", "redis redis redis cache", embedding=[0.0, 1.0, 0.0])
    commit(service, ctx, "vault", "k3", "redis cluster notes")  # no vector
    commit(service, ctx, "vault", "k4", "unrelated", embedding=[0.0, 1.0])
    plain = search(service, ctx, "redis")
    assert keys(plain)[0] == "k2" and plain.results[0].relevance == 1.0 and plain.total_searched == 3
    assert min(h.relevance for h in plain.results) == 0.0  # min-max over the matches
    blended = search(service, ctx, "redis", query_embedding=[1.0, 0.0, 0.0])
    by_key = {h.key: h.relevance for h in blended.results}
    k1_bm25 = {h.key: h.relevance for h in plain.results}["k1"]
    assert by_key["k1"] == pytest.approx(0.4 * k1_bm25 + 0.6 * 1.0, abs=1e-4)
    assert by_key["k2"] == pytest.approx(0.4 * 1.0, abs=1e-4)  # orthogonal vector
    assert by_key["k3"] == {h.key: h.relevance for h in plain.results}["k3"]  # no vector: bm25 alone
    assert keys(blended)[0] == "k1"
    assert search(service, ctx, "redis", limit=1).total_searched == 3 and len(search(service, ctx, "redis", limit=1).results) == 1


def test_fts5_query_syntax(service: MemoryService, ctx: CallContext) -> None:
    commit(service, ctx, "vault", "a", "the quick brown fox jumps")
    commit(service, ctx, "vault", "b", "a brown dog sleeps")
    commit(service, ctx, "vault", "c", "quick thinking saves the day", tags=["ops"])
    assert sorted(keys(search(service, ctx, '"brown fox"'))) == ["a"]
    assert sorted(keys(search(service, ctx, "brown NOT fox"))) == ["b"]
    assert sorted(keys(search(service, ctx, "quick AND brown"))) == ["a"]
    assert sorted(keys(search(service, ctx, "quick brown"))) == ["a"]  # implicit AND
    assert sorted(keys(search(service, ctx, "fox OR dog"))) == ["a", "b"]
    assert sorted(keys(search(service, ctx, "(fox OR dog) NOT sleeps"))) == ["a"]
    assert sorted(keys(search(service, ctx, "sle*"))) == ["b"]
    assert sorted(keys(search(service, ctx, "jumping"))) == ["a"]  # stemmed as the index stems
    assert sorted(keys(search(service, ctx, "key:c"))) == ["c"]
    assert sorted(keys(search(service, ctx, "tags:ops"))) == ["c"]
    assert sorted(keys(search(service, ctx, "NEAR(quick brown, 5)"))) == ["a"]
    for bad in ('"unclosed', "(fox", "fox)", "AND fox", "fox OR", "NOT fox"):
        with pytest.raises(InvalidArgument):
            search(service, ctx, bad)


def test_isolation_between_agents(service: MemoryService) -> None:
    a, b = CallContext(session_id="sa", agent_id="agent-a"), CallContext(session_id="sb", agent_id="agent-b")
    commit(service, a, "vault", "shared_name", "agent a's secret plan")
    commit(service, b, "vault", "shared_name", "agent b's other plan")
    assert [h.content for h in search(service, a, "plan").results] == ["agent a's secret plan"]
    assert [h.content for h in search(service, b, "plan").results] == ["agent b's other plan"]
    assert service.vault.get("shared_name", b).content == "agent b's other plan"
    assert prune(service, b, "vault", key="shared_name") == 1
    assert service.vault.get("shared_name", a).content == "agent a's secret plan"
    commit(service, a, "session", "s", "a's session note")
    with pytest.raises(Forbidden):  # b may not name a's session
        service.vault.session("sa", b)


def test_read_only_credentials_search_only(service: MemoryService, ctx: CallContext) -> None:
    writer, reader = CallContext(session_id="w", agent_id="agent-r"), CallContext(session_id="r", agent_id="agent-r", read_only=True)
    commit(service, writer, "vault", "k", "readable note")
    assert keys(search(service, reader, "readable")) == ["k"]
    with pytest.raises(Forbidden):
        commit(service, reader, "vault", "k2", "nope")
    with pytest.raises(Forbidden):
        prune(service, reader, "vault", key="k")
    assert keys(search(service, reader, "readable OR nope")) == ["k"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.text(max_size=200)
    | st.lists(st.sampled_from(['"', "(", ")", "*", "AND", "OR", "NOT", "NEAR(", ",", "key:", "x", " ", "_", "회의"]), max_size=30).map(
        "".join
    )
)
def test_any_query_is_a_result_or_a_clean_refusal(service: MemoryService, ctx: CallContext, query: str) -> None:
    try:
        parse(query)
    except InvalidArgument:
        return
    result = search(service, ctx, query)  # once parsed, a search never fails
    assert result.total_searched >= 0
