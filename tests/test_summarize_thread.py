"""Working memory's end (004 §3 wm_buffer, §5.1 summarize_thread), on SQLite and PostgreSQL: the
tool stores one episodic memory a later session recalls; a foreign or empty session is refused
with nothing stored; a session's end and the idle expiry leave a summary before removing the
items; a session past its token budget folds its oldest items; a lent model writes the text (and
a failing one falls back); another agent's session with the same id is never touched. Then the
same through the official MCP client (sampling included) and the REST route."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from conftest import Clock, StoreEnv
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp_helpers import TIMEOUT_S, HttpServer, assert_backend, data, error_of, server_env, start_http_server
from mcp_types import CreateMessageRequestParams, CreateMessageResult, TextContent
from rest_helpers import KEY_A, KEY_B, problem_of, rest_env

from memento.app import build_app
from memento.embeddings.hashing import HashEmbedder
from memento.errors import Forbidden, InvalidArgument, Unavailable
from memento.factory import TokenCounter
from memento.lifecycle.summary import extractive
from memento.models import (
    AgentScope,
    AmendInput,
    CallContext,
    ConsolidateInput,
    Fragment,
    FragmentType,
    MemorySystem,
    PrivacyScope,
    RecallInput,
    RememberInput,
    Scope,
    SummarizeThreadInput,
    TTLTier,
)
from memento.service import MemoryService
from memento.settings import Settings
from memento.storage.protocol import SearchFilter

pytestmark = pytest.mark.backends("sqlite", "postgres")

A = CallContext(session_id="sa", agent_id="agent-a")
B = CallContext(session_id="sb", agent_id="agent-b")
OPERATOR = CallContext()
NOTES = [
    ("We chose PostgreSQL 16 for the billing service.", "decision"),
    ("The staging database is db-staging.internal:5432.", "fact"),
    ("The flaky checkout test was caused by a shared temp directory.", "error"),
]
COUNT = TokenCounter().count


def note(service: MemoryService, ctx: CallContext, text: str, type_: str = "fact", session: str | None = None) -> str:
    inp = RememberInput(content=text, topic="billing", type=FragmentType(type_), scope=Scope.SESSION, sessionId=session)
    result = service.remember(inp, ctx)
    assert result.created
    return result.id


def working(service: MemoryService, owner: str, session: str) -> list[Fragment]:
    """The working memory `owner` keeps under `session`, read from the store."""
    filt = SearchFilter(session_id=session, only_session=True, owner=owner)
    return service.store.list_fragments(AgentScope(owner), filt, 1000)


def episodes(service: MemoryService, owner: str) -> list[Fragment]:
    """`owner`'s episodic memories (the summaries), oldest first."""
    found = service.store.list_fragments(AgentScope(owner), SearchFilter(owner=owner, memory_system=MemorySystem.EPISODIC), 1000)
    return sorted(found, key=lambda f: f.seq)


def write_notes(service: MemoryService, ctx: CallContext, session: str | None = None) -> list[str]:
    return [note(service, ctx, text, type_, session) for text, type_ in NOTES]


# ---------------------------------------------------------------- the extractive summary


def item(n: int, text: str, importance: float = 0.5, type_: FragmentType = FragmentType.FACT, topic: str = "t") -> Fragment:
    from datetime import UTC, datetime

    created = datetime(2026, 1, 1, 12, n, tzinfo=UTC)
    return Fragment(f"frag-{n:016d}", text, topic, type_, [], importance, f"h{n}", "a", TTLTier.HOT, created, seq=n)


def test_the_extractive_summary_keeps_order_drops_repeats_and_names_kinds() -> None:
    items = [
        item(1, "We chose PostgreSQL 16 for billing.", 0.8, FragmentType.DECISION),
        item(2, "Staging runs on port 5432."),
        item(3, "we chose postgresql 16 for billing"),  # the same words again
        item(4, "Staging runs on port 5432 behind the proxy."),  # says all item 2 says, and more
    ]
    text = extractive(items, COUNT, 300, None)
    assert text.splitlines() == [
        "Session of 2026-01-01: 4 working-memory notes on t",
        "- [decision] We chose PostgreSQL 16 for billing.",
        "- Staging runs on port 5432 behind the proxy.",
    ]
    assert extractive(items, COUNT, 300, "Billing day").splitlines()[0] == "Billing day"


def test_the_extractive_summary_fits_its_cap_with_the_most_informative_items() -> None:
    filler = [item(n, f"checked item number {n} again") for n in range(1, 40)]
    rich = item(40, "Decided: migrate billing invoices to PostgreSQL 16 with logical replication, cutover Friday", 0.9)
    text = extractive([*filler, rich], COUNT, 60)
    assert COUNT(text) <= 60
    assert "logical replication" in text  # the note with the most to say is kept
    assert text.splitlines()[-1].startswith("(+") and text.splitlines()[-1].endswith("more notes)")
    lines = text.splitlines()[1:-1]
    assert lines[-1].startswith("- Decided: migrate billing")  # written last, shown last
    numbers = [int(line.split()[4]) for line in lines[:-1]]
    assert numbers and numbers == sorted(numbers)  # in the order written


# ---------------------------------------------------------------- the tool, on both backends


def test_summarize_thread_stores_one_episodic_memory_a_later_session_recalls(service: MemoryService) -> None:
    ids = write_notes(service, A)
    result = service.summarize_thread(SummarizeThreadInput(), A)
    assert (result.session_id, result.item_count, result.removed, result.method) == ("sa", 3, 0, "extractive")
    (stored,) = service.store.get_many(AgentScope("agent-a"), [result.id])
    assert (stored.type, stored.memory_system, stored.session_id, stored.privacy_scope) == (
        FragmentType.EPISODE,
        MemorySystem.EPISODIC,
        None,
        PrivacyScope.PRIVATE,
    )
    assert stored.origin_trace is not None
    assert {k: stored.origin_trace[k] for k in ("sessionId", "itemCount", "itemIds")} == {"sessionId": "sa", "itemCount": 3, "itemIds": ids}
    assert all(text in result.summary for text, _ in NOTES)
    assert len(working(service, "agent-a", "sa")) == 3  # kept by default
    later = service.recall(RecallInput(text="PostgreSQL billing staging database"), CallContext(session_id="later", agent_id="agent-a"))
    assert result.id in [f.id for f in later.fragments]
    assert service.recall(RecallInput(text="PostgreSQL billing staging database"), B).fragments == []  # another agent's


def test_each_item_goes_into_one_summary_only(service: MemoryService) -> None:
    write_notes(service, A)
    first = service.summarize_thread(SummarizeThreadInput(), A)
    with pytest.raises(InvalidArgument, match="all in an earlier summary; nothing stored"):
        service.summarize_thread(SummarizeThreadInput(), A)
    newer = note(service, A, "The invoice job now retries with backoff.")
    second = service.summarize_thread(SummarizeThreadInput(title="Afternoon"), A)
    assert second.item_count == 1 and second.summary.splitlines()[0] == "Afternoon"
    assert [e.id for e in episodes(service, "agent-a")] == [first.id, second.id]
    assert episodes(service, "agent-a")[1].origin_trace["itemIds"] == [newer]  # type: ignore[index]


def test_keep_false_removes_the_items_with_the_summary(service: MemoryService) -> None:
    write_notes(service, A)
    result = service.summarize_thread(SummarizeThreadInput(keep=False), A)
    assert (result.item_count, result.removed) == (3, 3)
    assert working(service, "agent-a", "sa") == []
    assert [e.id for e in episodes(service, "agent-a")] == [result.id]


def test_a_foreign_session_is_refused_and_nothing_changes(service: MemoryService) -> None:
    theirs = write_notes(service, B, session="b-task")
    with pytest.raises(Forbidden, match="belongs to another namespace"):
        service.summarize_thread(SummarizeThreadInput(sessionId="b-task", keep=False), A)
    assert sorted(f.id for f in working(service, "agent-b", "b-task")) == sorted(theirs)
    assert episodes(service, "agent-a") == [] and episodes(service, "agent-b") == []


def test_an_empty_session_is_refused_with_nothing_stored(service: MemoryService) -> None:
    before = service.store.stats(AgentScope("system"))["total"]
    with pytest.raises(InvalidArgument, match="no working memory to summarize; nothing stored"):
        service.summarize_thread(SummarizeThreadInput(), A)
    with pytest.raises(InvalidArgument, match="needs a sessionId"):
        service.summarize_thread(SummarizeThreadInput(), CallContext(agent_id="agent-a"))
    assert service.store.stats(AgentScope("system"))["total"] == before
    assert episodes(service, "agent-a") == []


def test_a_lent_model_writes_the_summary_and_a_failing_one_falls_back(service: MemoryService) -> None:
    write_notes(service, A)
    prompts: list[tuple[str, str | None, int]] = []

    def model(prompt: str, system: str | None, max_tokens: int) -> str:
        prompts.append((prompt, system, max_tokens))
        return "  Billing moved to PostgreSQL 16; staging is db-staging.internal:5432.  "

    lent = service.summarize_thread(SummarizeThreadInput(), CallContext(session_id="sa", agent_id="agent-a", complete=model))
    assert (lent.method, lent.summary) == ("sampling", "Billing moved to PostgreSQL 16; staging is db-staging.internal:5432.")
    ((prompt, system, max_tokens),) = prompts
    assert all(text in prompt for text, _ in NOTES) and system and max_tokens == service.settings.summary_max_tokens

    def broken(prompt: str, system: str | None, max_tokens: int) -> str:
        raise Unavailable("the client refused")

    note(service, A, "The invoice job now retries with backoff.")
    fallen = service.summarize_thread(SummarizeThreadInput(), CallContext(session_id="sa", agent_id="agent-a", complete=broken))
    assert (fallen.method, fallen.fallback) == ("extractive", "sampling: the client refused")
    assert "retries with backoff" in fallen.summary


# ---------------------------------------------------------------- the automatic paths


def test_the_end_of_a_session_leaves_an_episodic_summary_of_what_none_covered(service: MemoryService) -> None:
    write_notes(service, A)
    checkpoint = service.summarize_thread(SummarizeThreadInput(), A)
    last = note(service, A, "The invoice job now retries with backoff.")
    assert service.end_session("sa", A) == 4
    assert working(service, "agent-a", "sa") == []
    first, ending = episodes(service, "agent-a")
    assert first.id == checkpoint.id and ending.origin_trace is not None
    assert (ending.origin_trace["itemIds"], ending.origin_trace["method"]) == ([last], "extractive")
    assert service.end_session("sa", A) == 0 and len(episodes(service, "agent-a")) == 2  # nothing left, nothing new


def test_the_idle_expiry_summarizes_each_idle_session_before_removing_it(service: MemoryService, clock: Clock) -> None:
    write_notes(service, A)
    write_notes(service, B)
    clock.now += service.consolidator.session_ttl + timedelta(minutes=1)
    live = note(service, CallContext(session_id="fresh", agent_id="agent-a"), "Still working on the refund flow.")
    result = service.memory_consolidate(ConsolidateInput(), OPERATOR)
    assert (result.working_memory_expired, result.working_memory_summarized) == (6, 2)
    for owner, session in (("agent-a", "sa"), ("agent-b", "sb")):
        assert working(service, owner, session) == []
        (summary,) = episodes(service, owner)
        assert summary.origin_trace is not None and summary.origin_trace["sessionId"] == session
        assert summary.origin_trace["itemCount"] == 3 and summary.agent_id == owner
    assert [f.id for f in working(service, "agent-a", "fresh")] == [live]  # a live session is left alone


def test_a_session_over_its_token_budget_folds_its_oldest_items(tmp_path: Path, store_env: StoreEnv, clock: Clock) -> None:
    settings = Settings(**store_env(tmp_path), EMBEDDING_PROVIDER="hash", MEMENTO_WORKING_MEMORY_TOKEN_BUDGET=60)  # type: ignore[arg-type]
    app = build_app(settings, embedder=HashEmbedder(64), clock=clock)
    try:
        service = app.service
        written: list[str] = []
        messages = []
        for n in range(12):
            clock.now += timedelta(seconds=1)
            text = f"Step {n}: checked invoice batch {n * 7} against the ledger export {n}."
            result = service.remember(RememberInput(content=text, topic="billing", type=FragmentType.FACT, scope=Scope.SESSION), A)
            written.append(result.id)
            messages.append(result.message)
            assert service.store.session_tokens("agent-a", "sa") <= 60  # the buffer stays within its budget
            if result.message and "folded" in result.message:
                assert service.store.session_tokens("agent-a", "sa") <= 30  # folded down to half, not to the brim
        left = [f.id for f in sorted(working(service, "agent-a", "sa"), key=lambda f: f.seq)]
        folded = [i for e in episodes(service, "agent-a") for i in (e.origin_trace or {})["itemIds"]]
        assert folded + left == written  # the oldest were folded, in order, and nothing was dropped
        assert left[-1] == written[-1] and len(episodes(service, "agent-a")) >= 2
        assert any(m and "folded into episodic summary" in m for m in messages)
    finally:
        app.close()


def test_with_the_setting_off_a_session_end_only_removes(tmp_path: Path, store_env: StoreEnv, clock: Clock) -> None:
    settings = Settings(**store_env(tmp_path), EMBEDDING_PROVIDER="hash", MEMENTO_SUMMARIZE_ON_SESSION_END=False)  # type: ignore[arg-type]
    app = build_app(settings, embedder=HashEmbedder(64), clock=clock)
    try:
        write_notes(app.service, A)
        write_notes(app.service, B)
        assert app.service.end_session("sa", A) == 3
        clock.now += app.service.consolidator.session_ttl + timedelta(minutes=1)
        result = app.service.memory_consolidate(ConsolidateInput(), OPERATOR)
        assert (result.working_memory_expired, result.working_memory_summarized) == (3, 0)
        assert episodes(app.service, "agent-a") == [] and episodes(app.service, "agent-b") == []
    finally:
        app.close()


def test_another_agents_session_with_the_same_id_is_never_touched(tmp_path: Path, store_env: StoreEnv, clock: Clock) -> None:
    settings = Settings(**store_env(tmp_path), EMBEDDING_PROVIDER="hash", MEMENTO_WORKING_MEMORY_TOKEN_BUDGET=40)  # type: ignore[arg-type]
    app = build_app(settings, embedder=HashEmbedder(64), clock=clock)
    try:
        service = app.service
        a, b = CallContext(session_id="same", agent_id="agent-a"), CallContext(session_id="same", agent_id="agent-b")
        theirs = [note(service, b, text, type_) for text, type_ in NOTES[:2]]
        for n in range(6):  # agent-a's budget folds: agent-b's rows stay
            note(service, a, f"Agent A step {n} touched the ledger export {n}.")
        service.summarize_thread(SummarizeThreadInput(), a)
        assert service.end_session("same", a) > 0
        assert sorted(f.id for f in working(service, "agent-b", "same")) == sorted(theirs)
        assert episodes(service, "agent-b") == []
        assert all(e.agent_id == "agent-a" for e in episodes(service, "agent-a"))
    finally:
        app.close()


# ---------------------------------------------------------------- over MCP and REST


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, module_store_env: StoreEnv, backend: str) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("summarize")
    running = start_http_server({**server_env(module_store_env(folder)), **rest_env()}, folder / "server.log")
    try:
        assert_backend(running, backend)
        yield running
    finally:
        running.stop()


class Sampler:
    """The client's model (the official client's sampling_callback): answers `reply`, keeps the requests."""

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.seen: list[CreateMessageRequestParams] = []

    async def __call__(self, context: ClientRequestContext, params: CreateMessageRequestParams) -> CreateMessageResult:
        self.seen.append(params)
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text=self.reply), model="client-model")


@asynccontextmanager
async def session(server: HttpServer, key: str, sampler: Sampler | None = None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(TIMEOUT_S, read=300)) as http:
        transport = streamable_http_client(server.mcp, http_client=http)
        async with Client(transport, read_timeout_seconds=TIMEOUT_S, sampling_callback=sampler, mode="legacy") as client:
            yield client


async def remember(client: Client, text: str, **extra: Any) -> str:
    stored = data(await client.call_tool("remember", {"content": text, "topic": "billing", "type": "fact", "scope": "session", **extra}))
    return str(stored["id"])


async def recall(client: Client, text: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = data(await client.call_tool("recall", {"text": text}))["fragments"]
    return found


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_tool_over_mcp_returns_the_memory_a_later_session_recalls(server: HttpServer) -> None:
    async with session(server, KEY_A) as client:
        assert "summarize_thread" in {tool.name for tool in (await client.list_tools()).tools}
        code, message, _ = error_of(await client.call_tool("summarize_thread", {}))
        assert code == "invalid_argument" and "no working memory" in message
        ids = [await remember(client, text) for text, _ in NOTES]
        result = data(await client.call_tool("summarize_thread", {"title": "Billing migration"}))
        assert (result["itemCount"], result["removed"], result["method"]) == (3, 0, "extractive")
        assert result["summary"].startswith("Billing migration\n")
    async with session(server, KEY_A) as later:
        hits = await recall(later, "PostgreSQL billing staging database")
        assert result["id"] in [h["id"] for h in hits]
        assert not set(ids) & {h["id"] for h in hits}  # the items ended with their session
    async with session(server, KEY_B) as other:
        assert result["id"] not in [h["id"] for h in await recall(other, "PostgreSQL billing staging database")]


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_closed_session_leaves_an_episodic_summary(server: HttpServer) -> None:
    async with session(server, KEY_A) as client:
        await remember(client, "The refund webhook signs payloads with HMAC-SHA256.")
        await remember(client, "Refunds over 500 EUR need a second approver.")
    async with session(server, KEY_A) as later:
        # Other tests of this module leave episodes of their own in the same namespace: the one
        # this session left is the one holding both of its notes.
        episodes = [h for h in await recall(later, "refund webhook approver") if h["type"] == "episode"]
        assert [h for h in episodes if "HMAC-SHA256" in h["content"] and "second approver" in h["content"]]


@pytest.mark.slow
@pytest.mark.anyio
async def test_with_sampling_the_summary_is_the_clients_text(server: HttpServer) -> None:
    sampler = Sampler("Billing settled on PostgreSQL 16 with a shared-temp-dir test fix.")
    async with session(server, KEY_A, sampler) as client:
        for text, _ in NOTES:
            await remember(client, text)
        result = data(await client.call_tool("summarize_thread", {"keep": False}))
        assert (result["method"], result["summary"], result["removed"]) == ("sampling", sampler.reply, 3)
        ((params,),) = [sampler.seen]
        assert all(text in str(params.messages[0].content) for text, _ in NOTES)
        code, message, _ = error_of(await client.call_tool("summarize_thread", {}))  # nothing left
        assert code == "invalid_argument"


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_rest_route_summarizes_an_own_named_session_and_refuses_others(server: HttpServer) -> None:
    async with session(server, KEY_A) as client:
        await remember(client, "The tax export runs nightly at 02:00 UTC.", sessionId="rest-thread")
        await remember(client, "The tax export writes to s3://exports/tax.", sessionId="rest-thread")
    url = server.url + "/api/sessions/rest-thread/summarize"
    refused = httpx.post(url, json={}, headers={"Authorization": f"Bearer {KEY_B}"}, timeout=TIMEOUT_S)
    assert problem_of(refused, 403)["code"] == "forbidden"
    done = httpx.post(url, json={"keep": False}, headers={"Authorization": f"Bearer {KEY_A}"}, timeout=TIMEOUT_S)
    assert done.status_code == 201, done.text
    body = done.json()
    assert (body["sessionId"], body["itemCount"], body["removed"]) == ("rest-thread", 2, 2)
    assert "s3://exports/tax" in body["summary"]
    again = httpx.post(url, json={}, headers={"Authorization": f"Bearer {KEY_A}"}, timeout=TIMEOUT_S)
    assert problem_of(again, 400)["code"] == "invalid_argument"
    bad = httpx.post(url, json={"keep": "no", "extra": 1}, headers={"Authorization": f"Bearer {KEY_A}"}, timeout=TIMEOUT_S)
    assert bad.status_code == 422
    assert json.loads(bad.text)["status"] == 422


def test_an_item_amended_while_its_summary_is_written_is_not_removed(service: MemoryService, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = write_notes(service, A)
    real = extractive  # what memento.summarize calls
    amended: list[str] = []

    def racing(*args: Any, **kwargs: Any) -> str:
        text = real(*args, **kwargs)  # the summary of the items as read
        if not amended:  # another request amends one of them before the summary is stored
            service.amend(AmendInput(id=ids[1], content="The staging database moved to db-staging-2.internal:5432."), A)
            amended.append(ids[1])
        return text

    monkeypatch.setattr("memento.summarize.extractive", racing)
    assert service.end_session("sa", A) == 0  # nothing removed, nothing summarised from the old text
    assert episodes(service, "agent-a") == [] and len(working(service, "agent-a", "sa")) == 3
    assert service.end_session("sa", A) == 3  # the next try reads the new text
    (summary,) = episodes(service, "agent-a")
    assert "db-staging-2" in summary.content and working(service, "agent-a", "sa") == []
