"""Seed 003's distillation: the heuristic sieve, the strict reading of a model's answer, the
near-duplicate rule, and the face's operation on SQLite and PostgreSQL (what is stored and how,
deduplication against the namespace and within the call, dry runs, the model and its fallback,
isolation between agents and workspaces, read-only refusal, bad input changing nothing)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from conftest import StoreEnv
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_helpers import SERVE, TIMEOUT_S, HttpServer, assert_backend, data, error_of, server_env, start_http_server
from mcp_types import CreateMessageRequestParams, CreateMessageResult, TextContent
from pydantic import ValidationError
from rest_helpers import KEY_A, KEY_A_READ, KEY_B, problem_of, rest_env

from memento.app import App, build_app
from memento.embeddings import LocalE5Embedder
from memento.errors import Forbidden, Unavailable
from memento.models import AgentScope, CallContext, FragmentType
from memento.protocol_face.distill import same_meaning
from memento.protocol_face.distill_heuristic import extract
from memento.protocol_face.distill_llm import SYSTEM, InvalidAnswer, parse_answer
from memento.protocol_face.distill_models import MAX_TRANSCRIPT_CHARS, DistillInput, DistillResult
from memento.protocol_face.memory_models import protocol_type
from memento.settings import Settings

pytestmark = pytest.mark.backends("sqlite", "postgres")
A = CallContext(session_id="sa", agent_id="agent-a")
B = CallContext(session_id="sb", agent_id="agent-b")

SESSION = """User: Hi! Can you help me with the billing service today?
Assistant: Sure, I'd be happy to help. Let me look at the code first.
User: We decided to use PostgreSQL 16 for billing, not MySQL.
User: Never push directly to main.
Assistant: I've updated src/billing/db.py to use the new connection pool.
User: thanks! The staging DB is at db-staging.internal:5432.
Assistant: Turns out the flaky test was caused by a shared temp directory.
User: What do you think about Redis for the cache?
User: ok sounds good
"""
EXPECTED = [
    ("We decided to use PostgreSQL 16 for billing, not MySQL.", "decision"),
    ("Never push directly to main.", "instruction"),
    ("The staging DB is at db-staging.internal:5432.", "fact"),
    ("Turns out the flaky test was caused by a shared temp directory.", "observation"),
]


def distill(app: App, ctx: CallContext, transcript: str | list[dict[str, str]] = SESSION, **fields: Any) -> DistillResult:
    conversation = {"transcript": transcript} if isinstance(transcript, str) else {"messages": transcript}
    return app.service.protocol.distill.extract(DistillInput.model_validate({**conversation, **fields}), ctx)


def found(result: DistillResult) -> list[tuple[str, str]]:
    return [(m.content, m.type) for m in result.memories]


# ---------------------------------------------------------------- the heuristic sieve


def test_the_sieve_keeps_decisions_instructions_lessons_and_facts_and_drops_the_rest() -> None:
    assert [(c.content, c.type) for c in extract([(None, SESSION)], 20)] == EXPECTED


def test_the_sieve_reads_messages_strips_prefixes_and_filler_and_skips_code() -> None:
    turns = [
        ("user", "- Okay, so the API rate limit is 100 requests per minute."),
        ("assistant", "Here's the updated config:\n```\nrate_limit = 100\nnever = true\n```\nLet me know if that works."),
        ("user", "**User:** Make sure the migrations run before every deploy!"),
        ("assistant", "I think we could maybe use Redis."),
        ("user", "Dana prefers short pull requests."),
    ]
    assert [(c.content, c.type) for c in extract(turns, 20)] == [
        ("The API rate limit is 100 requests per minute.", "fact"),
        ("Make sure the migrations run before every deploy!", "instruction"),
        ("Dana prefers short pull requests.", "fact"),
    ]


def test_the_sieve_understands_korean_cues() -> None:
    korean = (
        "사용자: 안녕하세요!\n"
        "사용자: 배포는 매주 목요일 오후에 하기로 했어요.\n"
        "사용자: 절대 금요일에는 배포하지 마세요.\n"
        "어시스턴트: 확인해 보겠습니다.\n"
        "어시스턴트: 알고 보니 타임아웃의 원인은 커넥션 풀 크기였습니다.\n"
        "사용자: 이 방법이 괜찮을까요?\n"
    )
    assert [(c.content, c.type) for c in extract([(None, korean)], 20)] == [
        ("배포는 매주 목요일 오후에 하기로 했어요.", "decision"),
        ("절대 금요일에는 배포하지 마세요.", "instruction"),
        ("알고 보니 타임아웃의 원인은 커넥션 풀 크기였습니다.", "observation"),
    ]


def test_the_sieve_keeps_the_surest_in_transcript_order_when_capped() -> None:
    kept = extract([(None, SESSION)], 2)
    assert [c.type for c in kept] == ["decision", "instruction"]


# ---------------------------------------------------------------- a model's answer


def test_a_models_answer_is_read_as_json_items() -> None:
    answer = json.dumps(
        [
            {"content": " Billing runs on PostgreSQL 16. ", "type": "fact", "tags": ["Billing", "db", "db"]},
            {"content": "Prefers pnpm over npm.", "type": "preference", "confidence": 0.9},
        ]
    )
    assert [(c.content, c.type, c.tags) for c in parse_answer(answer, 10)] == [
        ("Billing runs on PostgreSQL 16.", "fact", ("billing", "db")),
        ("Prefers pnpm over npm.", "fact", ()),
    ]
    assert len(parse_answer(f"```json\n{answer}\n```", 1)) == 1
    assert len(parse_answer(json.dumps({"memories": json.loads(answer)}), 10)) == 2
    assert parse_answer("[]", 10) == []


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("Sure! Here are the memories: ...", "not JSON"),
        ('{"content": "x", "type": "fact"}', "not an array"),
        ('{"facts": []}', "'facts'"),
        ('[{"type": "fact"}]', "content"),
        ('[{"content": "   ", "type": "fact"}]', "content"),
        ('[{"content": "x", "type": "opinion"}]', "type"),
        ('[{"content": "x", "type": "fact", "tags": [3]}]', "tags"),
        ('["just text"]', "0"),
    ],
)
def test_an_answer_not_exactly_as_asked_is_refused(answer: str, why: str) -> None:
    with pytest.raises(InvalidAnswer, match=why):
        parse_answer(answer, 10)


# ---------------------------------------------------------------- the near-duplicate rule


def test_differing_numbers_are_different_facts_whatever_the_vectors_say() -> None:
    assert same_meaning("The rate limit is 100 per minute.", "The rate limit is 500 per minute.", 0.999, 0.7) is None
    assert same_meaning("The rate limit is 100 per minute.", "Rate limit: 100 per minute.", 0.98, 0.7) is not None


def test_without_vectors_only_nearly_the_same_words_count() -> None:
    assert same_meaning("Alice owns the payments repository.", "alice owns the payments repository", None, 0.0) == 1.0
    assert same_meaning("Alice owns the payments repository.", "Alice owns the search repository.", None, 0.0) is None


# ---------------------------------------------------------------- the face, on every backend


def test_distill_stores_each_novel_memory_as_a_003_memory(app: App) -> None:
    result = distill(app, A, tags=["project:billing"])
    assert (result.method, result.fallback, result.dry_run, result.count) == ("heuristic", None, False, 4)
    assert found(result) == EXPECTED and result.skipped == []
    stored = {f.id: f for f in app.store.get_many(AgentScope("agent-a"), [m.id or "" for m in result.memories])}
    kinds = [stored[m.id or ""].type for m in result.memories]
    assert kinds == [FragmentType.DECISION, FragmentType.PROCEDURE, FragmentType.FACT, FragmentType.OBSERVATION]
    for memory in result.memories:
        fragment = stored[memory.id or ""]
        assert fragment.tags == ["project:billing", "source:distill"] == memory.tags
        assert (fragment.agent_id, fragment.source, fragment.topic, fragment.content) == (
            "agent-a",
            "distill",
            "project:billing",
            memory.content,
        )
        assert protocol_type(fragment.type) == memory.type  # what the 003 memories show
    recalled = app.service.protocol.memories.search("Which database does billing use?", A, 3)
    assert (recalled[0].id, recalled[0].type) == (result.memories[0].id, "decision")


def test_a_second_distill_of_the_same_talk_stores_nothing(app: App) -> None:
    first = distill(app, A, SESSION + "\nUser: Never push directly to main.\n")  # said twice: stored once
    assert first.count == 4 and [(s.content, s.reason, s.duplicate_of) for s in first.skipped] == [
        ("Never push directly to main.", "batch", None)
    ]
    again = distill(app, A)
    assert again.count == 0 and again.memories == []
    assert [(s.content, s.reason, s.duplicate_of, s.similarity) for s in again.skipped] == [
        (m.content, "exact", m.id, 1.0) for m in first.memories
    ]


def test_a_dry_run_returns_the_candidates_and_stores_nothing(app: App) -> None:
    preview = distill(app, A, dry_run=True)
    assert preview.dry_run and preview.count == 4 and found(preview) == EXPECTED
    assert all(m.id is None and m.tags == ["source:distill"] for m in preview.memories)
    assert distill(app, A, dry_run=True).count == 4  # still nothing stored
    assert distill(app, A).count == 4


def test_a_configured_model_drafts_and_its_tags_are_kept(app: App) -> None:
    asked: list[tuple[str, str | None, int]] = []

    def model(prompt: str, system: str | None, max_tokens: int) -> str:
        asked.append((prompt, system, max_tokens))
        return json.dumps([{"content": "Billing runs on PostgreSQL 16.", "type": "fact", "tags": ["db"]}])

    app.service.protocol.llm = model
    result = distill(app, A, [{"role": "user", "content": "billing: postgres 16 it is"}], tags=["project:billing"])
    assert (result.method, result.fallback, found(result)) == ("llm", None, [("Billing runs on PostgreSQL 16.", "fact")])
    assert result.memories[0].tags == ["project:billing", "db", "source:distill"]
    ((prompt, system, _),) = asked
    assert system == SYSTEM and prompt.endswith("TRANSCRIPT:\nuser: billing: postgres 16 it is")


def test_a_lent_model_is_used_when_none_is_configured(app: App) -> None:
    lent = CallContext(agent_id="agent-a", complete=lambda prompt, system, tokens: '[{"content": "Use uv.", "type": "instruction"}]')
    result = distill(app, lent)
    assert (result.method, found(result)) == ("sampling", [("Use uv.", "instruction")])


def test_a_refused_sampling_request_falls_back_and_says_so(app: App) -> None:
    def refused(prompt: str, system: str | None, tokens: int) -> str:
        raise Unavailable("sampling failed: the user declined")

    result = distill(app, CallContext(agent_id="agent-a", complete=refused))
    assert (result.method, result.fallback) == ("heuristic", "sampling: sampling failed: the user declined")
    assert found(result) == EXPECTED


@pytest.mark.parametrize(
    ("answer", "fallback"), [("I could not find anything.", "llm: the answer is not JSON"), (Unavailable("model down"), "llm: model down")]
)
def test_a_failing_or_bad_model_falls_back_to_the_sieve(app: App, answer: str | Exception, fallback: str) -> None:
    def model(prompt: str, system: str | None, max_tokens: int) -> str:
        if isinstance(answer, Exception):
            raise answer
        return answer

    app.service.protocol.llm = model
    result = distill(app, A)
    assert result.method == "heuristic" and (result.fallback or "").startswith(fallback)
    assert found(result) == EXPECTED


def test_agents_and_workspaces_distill_into_their_own_namespace_only(app: App) -> None:
    first = distill(app, A)
    other = distill(app, B)  # agent-a's memories are not agent-b's: all novel for b
    workspace = distill(app, CallContext(agent_id="agent-a:proj", workspace="proj"))
    assert other.count == workspace.count == 4 and other.skipped == workspace.skipped == []
    ids_a = [m.id or "" for m in first.memories]
    assert app.store.get_many(AgentScope("agent-b"), ids_a) == []
    assert {f.agent_id for f in app.store.get_many(AgentScope("agent-b"), [m.id or "" for m in other.memories])} == {"agent-b"}


def test_the_shared_pool_is_not_a_reason_to_skip(app: App) -> None:
    admin = CallContext()  # the operator works in the shared pool `default`
    distill(app, admin)
    assert distill(app, A).count == 4  # agent-a sees the pool, but its own namespace has none of them


def test_read_only_credentials_may_preview_but_not_store(app: App) -> None:
    reader = CallContext(agent_id="agent-a", read_only=True)
    assert distill(app, reader, dry_run=True).count == 4
    with pytest.raises(Forbidden):
        distill(app, reader)
    assert distill(app, A, dry_run=True).count == 4  # nothing was stored


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"transcript": "x" * (MAX_TRANSCRIPT_CHARS + 1)}, "send it in parts"),
        ({"messages": [{"role": "user", "content": "y" * MAX_TRANSCRIPT_CHARS}, {"role": "user", "content": "z"}]}, "send it in parts"),
        ({"transcript": "   \n"}, "nothing to distill"),
        ({"messages": [{"role": "user"}]}, "content"),
        ({"messages": [{"role": "user", "content": "hi", "name": "x"}]}, "name"),
        ({"transcript": SESSION, "messages": [{"role": "user", "content": "hi"}]}, "exactly one"),
        ({}, "exactly one"),
        ({"transcript": SESSION, "max_memories": 0}, "max_memories"),
        ({"transcript": SESSION, "tags": ["ok", ""]}, "tags"),
        ({"transcript": SESSION, "mode": "seeds"}, "mode"),
    ],
)
def test_bad_input_is_refused_with_a_clear_error_and_changes_nothing(app: App, fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        DistillInput.model_validate(fields)
    assert distill(app, A, dry_run=True).count == 4


# ---------------------------------------------------------------- with the real local model


@pytest.fixture(scope="module")
def e5() -> LocalE5Embedder:
    return LocalE5Embedder()


@pytest.fixture
def e5_app(tmp_path: Path, e5: LocalE5Embedder) -> Iterator[App]:
    built = build_app(Settings(DATABASE_URL=f"sqlite:///{tmp_path}/e5.db"), embedder=e5)
    yield built
    built.close()


@pytest.mark.backends("sqlite")
def test_with_the_local_model_a_paraphrase_is_skipped_and_a_new_fact_kept(e5_app: App) -> None:
    distill(e5_app, A, "User: We decided to use PostgreSQL 16 for the billing service.\nUser: Alice owns the payments repository.")
    result = distill(
        e5_app,
        A,
        "User: The team chose PostgreSQL 16 for the billing service.\n"  # says the same: skipped
        "User: The payments repository is owned by Alice.\n"  # the same again, reworded
        "User: Bob owns the search repository.\n"  # related, but new
        "User: We decided to use Redis 7 for the session cache.\n",  # new
    )
    assert [(s.content, s.reason) for s in result.skipped] == [
        ("The team chose PostgreSQL 16 for the billing service.", "near"),
        ("The payments repository is owned by Alice.", "near"),
    ]
    assert [m.content for m in result.memories] == ["Bob owns the search repository.", "We decided to use Redis 7 for the session cache."]


# ---------------------------------------------------------------- the tool and the route, end to end


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Sampler:
    """A client's model (the official client's sampling_callback): answers with `reply`, keeps the requests."""

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.seen: list[CreateMessageRequestParams] = []

    async def __call__(self, context: ClientRequestContext, params: CreateMessageRequestParams) -> CreateMessageResult:
        self.seen.append(params)
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text=self.reply), model="client-model")


LENT = json.dumps([{"content": "The billing service runs on PostgreSQL 16.", "type": "fact", "tags": ["billing"]}])


def stdio(env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--transport", "stdio"], env=env)


@pytest.mark.slow
@pytest.mark.anyio
async def test_memento_extract_over_stdio_uses_the_clients_model_when_it_can_sample(tmp_path: Path, store_env: StoreEnv) -> None:
    env = {**server_env(store_env(tmp_path)), "MEMENTO_TOOLSETS": "protocol", "MEMENTO_STDIO_AGENT": "agent-s"}
    sampler = Sampler(LENT)
    # sampling/createMessage as a server request: a classic session (2026's rounds: tests/test_mrtr.py)
    async with Client(stdio(env), read_timeout_seconds=TIMEOUT_S, sampling_callback=sampler, mode="legacy") as client:
        assert "memento_extract" in {tool.name for tool in (await client.list_tools()).tools}
        lent = data(await client.call_tool("memento_extract", {"transcript": SESSION, "tags": ["project:billing"]}))
        assert (lent["method"], lent["count"]) == ("sampling", 1)
        assert lent["memories"][0]["tags"] == ["project:billing", "billing", "source:distill"]
        ((params,),) = [sampler.seen]
        assert params.system_prompt == SYSTEM and "Never push directly to main." in str(params.messages[0].content)
        code, message, _ = error_of(await client.call_tool("memento_extract", {"transcript": "", "dry_run": True}))
        assert code == "invalid_argument" and "nothing to distill" in message
    async with Client(stdio(env), read_timeout_seconds=TIMEOUT_S) as client:  # no sampling: the sieve
        plain = data(await client.call_tool("memento_extract", {"transcript": SESSION}))
        assert (plain["method"], plain["fallback"]) == ("heuristic", None)  # no model was asked
        assert [m["content"] for m in plain["memories"]] == [c for c, _ in EXPECTED]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, module_store_env: StoreEnv, backend: str) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("distill")
    env = {**server_env(module_store_env(folder)), **rest_env(), "MEMENTO_TOOLSETS": "memento,protocol"}
    running = start_http_server(env, folder / "server.log")
    try:
        assert_backend(running, backend)
        yield running
    finally:
        running.stop()


@pytest.mark.slow
@pytest.mark.anyio
async def test_memento_extract_over_http_samples_only_for_the_protocol_tools(server: HttpServer) -> None:
    sampler = Sampler(LENT)
    headers = {"Authorization": f"Bearer {KEY_A}", "X-Memento-Workspace": "mcp-sampling"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(TIMEOUT_S, read=300)) as http:
        async with Client(
            streamable_http_client(server.mcp, http_client=http), read_timeout_seconds=TIMEOUT_S, sampling_callback=sampler, mode="legacy"
        ) as client:
            data(await client.call_tool("remember", {"content": "A plain memory.", "topic": "t", "type": "fact"}))
            assert sampler.seen == []  # 000's tools never ask the client's model
            lent = data(await client.call_tool("memento_extract", {"transcript": SESSION, "dry_run": True}))
            assert (lent["method"], lent["dry_run"], lent["memories"][0]["id"]) == ("sampling", True, None)
            assert len(sampler.seen) == 1


def post(server: HttpServer, key: str, body: Any, workspace: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}", **({"X-Memento-Workspace": workspace} if workspace else {})}
    return httpx.post(server.url + "/v1/distill", json=body, headers=headers, timeout=TIMEOUT_S)


@pytest.mark.slow
def test_post_v1_distill_stores_then_finds_nothing_new(server: HttpServer) -> None:
    first = post(server, KEY_A, {"transcript": SESSION, "tags": ["project:billing"]}, workspace="rest")
    assert first.status_code == 201, first.text
    body = first.json()
    assert (body["method"], body["count"]) == ("heuristic", 4) and [m["type"] for m in body["memories"]] == [t for _, t in EXPECTED]
    again = post(server, KEY_A, {"messages": [{"role": "user", "content": c} for c, _ in EXPECTED]}, workspace="rest")
    assert again.status_code == 200 and again.json()["count"] == 0
    assert [s["reason"] for s in again.json()["skipped"]] == ["exact"] * 4
    other = post(server, KEY_B, {"transcript": SESSION}, workspace="rest")  # agent-b's workspace "rest" is its own
    assert other.status_code == 201 and other.json()["count"] == 4
    elsewhere = post(server, KEY_A, {"transcript": SESSION}, workspace="rest-2")  # another workspace of agent-a
    assert elsewhere.status_code == 201 and elsewhere.json()["count"] == 4


@pytest.mark.slow
def test_post_v1_distill_dry_runs_refuses_read_only_writes_and_bad_input(server: HttpServer) -> None:
    preview = post(server, KEY_A, {"transcript": SESSION, "dry_run": True}, workspace="rest-ro")
    assert preview.status_code == 200 and preview.json()["count"] == 4
    problem_of(post(server, KEY_A_READ, {"transcript": SESSION}, workspace="rest-ro"), 403)
    problem_of(post(server, KEY_A_READ, {"transcript": SESSION, "dry_run": True}, workspace="rest-ro"), 403)  # the gate: no POST
    problem_of(post(server, KEY_A, {"transcript": "x" * (MAX_TRANSCRIPT_CHARS + 1)}, workspace="rest-ro"), 422)
    problem_of(post(server, KEY_A, {"transcript": SESSION, "unknown": 1}, workspace="rest-ro"), 422)
    problem_of(post(server, "not-a-key-" + "x" * 20, {"transcript": SESSION}), 401)
    assert post(server, KEY_A, {"transcript": SESSION, "dry_run": True}, workspace="rest-ro").json()["count"] == 4  # nothing stored
    schema = httpx.get(server.url + "/v1/openapi.json", timeout=TIMEOUT_S).json()
    assert "/distill" in schema["paths"] and "DistillResult" in schema["components"]["schemas"]
