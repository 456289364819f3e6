"""Seed 003's skip list: the face on SQLite and PostgreSQL (expiry enforced, matching by words,
isolation per namespace, read-only refusal, bad input changing nothing), matching by meaning
with the real bundled model, the four tools through the official MCP client (stdio and
Streamable HTTP) and the /v1 routes over HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from conftest import Clock, StoreEnv
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_helpers import SERVE, TIMEOUT_S, HttpServer, assert_backend, error_of, server_env, start_http_server
from mcp_types import CallToolResult, TextContent
from pydantic import ValidationError
from rest_helpers import KEY_A, KEY_A_READ, KEY_B, OPERATOR, problem_of, rest_env

from memento.app import App, build_app
from memento.embeddings.local import LocalE5Embedder
from memento.errors import Forbidden, InvalidArgument, NotFound
from memento.models import AgentScope, CallContext
from memento.protocol_face.skips import (
    CALIBRATED_THRESHOLD,
    SkipAddInput,
    SkipCheckInput,
    SkipListInput,
    SkipRemoveInput,
    content_terms,
    parse_expiry,
    words_match,
)
from memento.service import MemoryService
from memento.settings import Settings

pytestmark = pytest.mark.backends("sqlite", "postgres")

ALICE = CallContext(agent_id="alice")
BOB = CallContext(agent_id="bob")
ALICE_READ = CallContext(agent_id="alice", read_only=True)
AURORA = {"item": "aurora alerts", "reason": "Kp too low to see from this latitude. Revisit when Kp > 4.", "expires": "2026-03-01"}


def add(service: MemoryService, ctx: CallContext = ALICE, **fields: str) -> str:
    return service.protocol.skips.add(SkipAddInput(**{**AURORA, **fields}), ctx).id


def listed(service: MemoryService, ctx: CallContext = ALICE) -> list[str]:
    return [e.item for e in service.protocol.skips.entries(SkipListInput(), ctx).entries]


def checked(service: MemoryService, query: str, ctx: CallContext = ALICE) -> list[tuple[str, str]]:
    return [(m.item, m.match) for m in service.protocol.skips.check(SkipCheckInput(query=query), ctx).matches]


# ---------------------------------------------------------------- the face, on both backends


def test_an_entry_is_stored_and_listed_newest_first_with_its_expiry(service: MemoryService, clock: Clock) -> None:
    first = service.protocol.skips.add(SkipAddInput(**AURORA), ALICE)
    assert first.id.startswith("skip-") and first.item == "aurora alerts" and first.reason.startswith("Kp too low")
    assert first.expires == "2026-03-01T23:59:59.999999+00:00"  # a date: through the end of that day, UTC
    assert first.created_at == clock.now.isoformat()
    clock.now += timedelta(minutes=1)
    add(service, item="Hacker News threads about Rust", expires="2026-02-01T09:30:00+09:00")
    result = service.protocol.skips.entries(SkipListInput(), ALICE)
    assert [e.item for e in result.entries] == ["Hacker News threads about Rust", "aurora alerts"] and result.total == 2
    assert result.entries[0].expires == "2026-02-01T00:30:00+00:00"  # a date-time keeps its instant, shown in UTC


def test_expired_entries_never_match_nor_list_and_an_add_purges_them(app: App, clock: Clock) -> None:
    service = app.service
    soon = add(service, expires=(clock.now + timedelta(hours=2)).isoformat())
    assert checked(service, "aurora") == [("aurora alerts", "words")]
    clock.now += timedelta(hours=2)  # the moment it expires it stops applying
    assert listed(service) == [] and checked(service, "aurora") == []
    assert service.protocol.skips.matches("any aurora tonight?", ALICE) == []
    with pytest.raises(NotFound):
        service.protocol.skips.remove(SkipRemoveInput(id=soon), ALICE)
    add(service, item="weather forecast checks")
    earlier = clock.now - timedelta(hours=3)  # before the first one expired: it is gone, not just hidden
    assert [s.item for s in app.store.skip_entries(AgentScope("alice"), earlier)] == ["weather forecast checks"]


@pytest.mark.parametrize(
    ("expires", "says"),
    [
        ("2025-12-31", "in the past"),
        ("2026-01-01T11:59:00Z", "in the past"),
        ("2027-01-02", "more than a year ahead"),
        ("next tuesday", "not an ISO date"),
        ("2026-02-30", "not an ISO date"),
    ],
)
def test_an_expiry_in_the_past_too_far_ahead_or_unreadable_is_refused_and_nothing_stored(
    service: MemoryService, expires: str, says: str
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        add(service, expires=expires)
    assert says in refused.value.message and expires in refused.value.message
    assert listed(service) == []


def test_missing_or_blank_fields_are_refused(service: MemoryService) -> None:
    for bad in ({"item": "  "}, {"reason": ""}, {"expires": ""}, {"item": "x" * 501}):
        with pytest.raises(ValidationError):
            SkipAddInput(**{**AURORA, **bad})
    with pytest.raises(ValidationError):
        SkipAddInput(item="aurora", reason="why")  # type: ignore[call-arg]  # expires is required
    assert listed(service) == []


def test_today_and_a_year_ahead_are_accepted(service: MemoryService, clock: Clock) -> None:
    add(service, item="today only", expires=clock.now.date().isoformat())
    add(service, item="a year", expires=(clock.now + timedelta(days=365)).isoformat())
    assert sorted(listed(service)) == ["a year", "today only"]


def test_matching_by_words_uses_stems_stopwords_and_korean_particles(service: MemoryService) -> None:
    add(service)
    add(service, item="the flaky payment integration tests", reason="upstream bug")
    add(service, item="회의록 정리", reason="이번 주는 다른 사람이 맡았다")
    assert checked(service, "Any aurora alert tonight?") == [("aurora alerts", "words")]  # alert ~ alerts
    assert checked(service, "aurora") == [("aurora alerts", "words")]  # a short query inside the item
    assert checked(service, "Should I debug the flaky payment integration test again?") == [
        ("the flaky payment integration tests", "words")
    ]
    assert checked(service, "오늘 회의록을 정리하자") == [("회의록 정리", "words")]  # particle and ending attached
    assert checked(service, "payment") == [("the flaky payment integration tests", "words")]
    assert checked(service, "the a of and") == []  # stop words only: nothing to match
    assert checked(service, "Write a poem about the sea") == []
    assert checked(service, "integration of the aurora data") == []  # some words of an item are not all of them


def test_the_word_rule_itself() -> None:
    assert content_terms("The Aurora ALERTS, please!") == ["aurora", "alert", "pleas"]
    assert words_match(["aurora", "alert"], ["check", "aurora", "alert"]) and words_match(["aurora", "alert"], ["aurora"])
    assert not words_match([], ["aurora"]) and not words_match(["aurora"], [])
    assert words_match(["회의록"], ["회의록을"]) and not words_match(["회"], ["회의록"])  # one syllable: whole words only


def test_the_check_result_says_skip_or_proceed(service: MemoryService) -> None:
    add(service)
    hit = service.protocol.skips.check(SkipCheckInput(query="aurora"), ALICE)
    assert hit.on_skip_list and hit.query == "aurora" and "SKIP 'aurora alerts'" in hit.message and "Kp too low" in hit.message
    (match,) = hit.matches
    assert match.match == "words" and match.similarity is None and match.expires == "2026-03-01T23:59:59.999999+00:00"
    miss = service.protocol.skips.check(SkipCheckInput(query="tide tables"), ALICE)
    assert not miss.on_skip_list and miss.matches == [] and miss.message.startswith("not on the skip list")


def test_without_a_calibrated_model_there_is_no_matching_by_meaning(service: MemoryService) -> None:
    assert service.embedder is not None and service.protocol.skips.threshold() is None  # the test's hash embedder
    add(service)
    assert checked(service, "Should I look at the northern lights tonight?") == []


def test_removing_an_entry(service: MemoryService) -> None:
    kept, gone = add(service, item="kept"), add(service, item="gone")
    removed = service.protocol.skips.remove(SkipRemoveInput(id=gone), ALICE)
    assert (removed.id, removed.removed) == (gone, True)
    assert listed(service) == ["kept"] and kept != gone
    with pytest.raises(NotFound):
        service.protocol.skips.remove(SkipRemoveInput(id=gone), ALICE)


def test_namespaces_never_see_or_change_each_others_entries(service: MemoryService) -> None:
    mine = add(service, item="aurora alerts")
    theirs = add(service, BOB, item="tide tables")
    workspace = CallContext(agent_id="alice:garden", workspace="garden")
    add(service, workspace, item="pruning roses")
    assert (
        listed(service) == ["aurora alerts"] and listed(service, BOB) == ["tide tables"] and listed(service, workspace) == ["pruning roses"]
    )
    assert checked(service, "aurora", BOB) == [] and checked(service, "tide tables") == [] and checked(service, "roses") == []
    with pytest.raises(NotFound):
        service.protocol.skips.remove(SkipRemoveInput(id=mine), BOB)
    assert listed(service) == ["aurora alerts"] and listed(service, BOB) == ["tide tables"]
    assert listed(service, CallContext()) == []  # the operator's own namespace (`default`) holds none of them
    del theirs


def test_a_read_only_credential_checks_and_lists_but_never_changes(service: MemoryService) -> None:
    kept = add(service)
    assert listed(service, ALICE_READ) == ["aurora alerts"] and checked(service, "aurora", ALICE_READ) == [("aurora alerts", "words")]
    with pytest.raises(Forbidden):
        add(service, ALICE_READ, item="something else")
    with pytest.raises(Forbidden):
        service.protocol.skips.remove(SkipRemoveInput(id=kept), ALICE_READ)
    assert listed(service) == ["aurora alerts"]


def test_parse_expiry_reads_dates_and_times_as_utc() -> None:
    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    assert parse_expiry("2026-01-05", now) == datetime(2026, 1, 5, 23, 59, 59, 999999, tzinfo=UTC)
    assert parse_expiry("2026-01-05T10:00:00", now) == datetime(2026, 1, 5, 10, tzinfo=UTC)  # no zone: UTC
    assert parse_expiry("2026-01-05T10:00:00Z", now) == parse_expiry("2026-01-05T19:00:00+09:00", now)


# ---------------------------------------------------------------- matching by meaning, with the real model


@pytest.fixture(scope="module")
def real_model() -> LocalE5Embedder:
    return LocalE5Embedder()


@pytest.fixture
def real_app(tmp_path: Path, real_model: LocalE5Embedder) -> Iterator[App]:
    built = build_app(Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'real.db'}"), embedder=real_model)
    yield built
    built.close()


REAL_ENTRIES = [
    ("aurora alerts", "Kp too low to see from this latitude. Revisit when Kp > 4."),
    ("the flaky payment integration test", "Known upstream bug, tracked in a ticket; do not debug it again."),
    ("조깅 일정", "무릎 부상으로 2주간 쉰다"),
]


@pytest.mark.slow
def test_the_real_model_matches_a_paraphrase_by_meaning_and_not_an_unrelated_message(real_app: App) -> None:
    skips = real_app.service.protocol.skips
    assert skips.threshold() == CALIBRATED_THRESHOLD
    expires = (datetime.now(UTC) + timedelta(days=30)).date().isoformat()
    for item, reason in REAL_ENTRIES:
        skips.add(SkipAddInput(item=item, reason=reason, expires=expires), ALICE)

    def meaning(message: str) -> list[str]:
        found = skips.matches(message, ALICE)
        assert all(m.match == "meaning" and m.similarity is not None and m.similarity >= CALIBRATED_THRESHOLD for m in found)
        return [m.item for m in found]

    # No word in common with the entries: only their meaning connects them.
    assert meaning("Should I look at the northern lights tonight?") == ["aurora alerts"]
    assert meaning("I'll debug that intermittently failing billing test") == ["the flaky payment integration test"]
    assert meaning("내일 아침에 달리기 하러 갈까?") == ["조깅 일정"]
    for unrelated in ("Write a poem about the sea", "What is the capital of France?", "Help me cook a vegetarian lasagna"):
        assert meaning(unrelated) == [], unrelated
    words = skips.matches("are there aurora alerts today?", ALICE)
    assert [(m.item, m.match) for m in words] == [("aurora alerts", "words")]  # words first; no second match by meaning


@pytest.mark.slow
def test_an_entry_stored_without_a_vector_of_the_model_is_embedded_when_checked(tmp_path: Path, real_model: LocalE5Embedder) -> None:
    settings = Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'swap.db'}")
    expires = (datetime.now(UTC) + timedelta(days=30)).date().isoformat()
    keyword_only = build_app(settings, embedder=None)
    try:
        keyword_only.service.protocol.skips.add(SkipAddInput(item=REAL_ENTRIES[0][0], reason=REAL_ENTRIES[0][1], expires=expires), ALICE)
        assert keyword_only.service.protocol.skips.matches("Should I look at the northern lights tonight?", ALICE) == []
    finally:
        keyword_only.close()
    with_model = build_app(settings, embedder=real_model)
    try:
        (stored,) = with_model.store.skip_entries(AgentScope("alice"), datetime.now(UTC))
        assert stored.embedding is None
        found = with_model.service.protocol.skips.matches("Should I look at the northern lights tonight?", ALICE)
        assert [(m.item, m.match) for m in found] == [("aurora alerts", "meaning")]
    finally:
        with_model.close()


# ---------------------------------------------------------------- the tools, through the official MCP client


def payload(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error is False, result.content
    block = result.content[0]
    assert isinstance(block, TextContent)
    parsed: dict[str, Any] = json.loads(block.text)
    return parsed


def in_a_month() -> str:
    return (datetime.now(UTC) + timedelta(days=30)).date().isoformat()


async def drive_the_tools(client: Client) -> None:
    names = {t.name for t in (await client.list_tools()).tools}
    assert {"memento_skip_add", "memento_skip_check", "memento_skip_list", "memento_skip_remove"} <= names
    assert "remember" not in names  # the protocol toolset alone
    added = payload(await client.call_tool("memento_skip_add", {"item": "aurora alerts", "reason": "Kp too low", "expires": in_a_month()}))
    assert (
        added["item"] == "aurora alerts"
        and added["id"].startswith("skip-")
        and set(added) == {"id", "item", "reason", "expires", "created_at"}
    )
    hit = payload(await client.call_tool("memento_skip_check", {"query": "any aurora alerts tonight?"}))
    assert hit["on_skip_list"] is True and [(m["id"], m["match"]) for m in hit["matches"]] == [(added["id"], "words")]
    miss = payload(await client.call_tool("memento_skip_check", {"query": "tide tables"}))
    assert miss == {"query": "tide tables", "on_skip_list": False, "matches": [], "message": "not on the skip list: proceed"}
    listing = payload(await client.call_tool("memento_skip_list", {}))
    assert listing["total"] == 1 and listing["entries"][0]["id"] == added["id"]
    code, message, _ = error_of(await client.call_tool("memento_skip_add", {"item": "x", "reason": "y", "expires": "2001-01-01"}))
    assert code == "invalid_argument" and "in the past" in message
    code, _, _ = error_of(await client.call_tool("memento_skip_add", {"item": "x", "reason": "y"}))
    assert code == "invalid_argument"  # expires is required
    assert payload(await client.call_tool("memento_skip_list", {}))["total"] == 1  # neither refusal stored anything
    assert payload(await client.call_tool("memento_skip_remove", {"id": added["id"]})) == {"id": added["id"], "removed": True}
    code, _, _ = error_of(await client.call_tool("memento_skip_remove", {"id": added["id"]}))
    assert code == "not_found"
    assert payload(await client.call_tool("memento_skip_list", {})) == {"entries": [], "total": 0}


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_tools_over_stdio_in_a_workspace(tmp_path: Path, store_env: StoreEnv) -> None:
    env = {**server_env(store_env(tmp_path)), "MEMENTO_TOOLSETS": "protocol", "MEMENTO_WORKSPACE": "garden"}
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--transport", "stdio"], env=env)
    async with Client(params, read_timeout_seconds=TIMEOUT_S) as client:
        await drive_the_tools(client)
        payload(await client.call_tool("memento_skip_add", {"item": "pruning roses", "reason": "wait for spring", "expires": in_a_month()}))
    other = {**env, "MEMENTO_WORKSPACE": "kitchen"}
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--transport", "stdio"], env=other)
    async with Client(params, read_timeout_seconds=TIMEOUT_S) as client:  # another workspace: another list
        assert payload(await client.call_tool("memento_skip_list", {})) == {"entries": [], "total": 0}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, module_store_env: StoreEnv, backend: str) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("protocol-skips")
    env = {**server_env(module_store_env(folder)), **rest_env(), "MEMENTO_TOOLSETS": "protocol"}
    running = start_http_server(env, folder / "server.log")
    try:
        assert_backend(running, backend)
        yield running
    finally:
        running.stop()


def mcp_client(server: HttpServer, key: str, workspace: str | None = None) -> Client:
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {key}"} | ({"X-Memento-Workspace": workspace} if workspace else {})
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(TIMEOUT_S, read=300))
    return Client(streamable_http_client(server.mcp, http_client=http), read_timeout_seconds=TIMEOUT_S)


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_tools_over_http_with_agent_keys(server: HttpServer) -> None:
    async with mcp_client(server, KEY_A, "mcp-tools") as client:
        await drive_the_tools(client)
        kept = payload(await client.call_tool("memento_skip_add", {"item": "pager rotation", "reason": "r", "expires": in_a_month()}))
    async with mcp_client(server, KEY_B, "mcp-tools") as other:  # B's workspace of the same name is B's own
        assert payload(await other.call_tool("memento_skip_list", {}))["total"] == 0
        assert error_of(await other.call_tool("memento_skip_remove", {"id": kept["id"]}))[0] == "not_found"
    async with mcp_client(server, KEY_A_READ, "mcp-tools") as reader:
        assert payload(await reader.call_tool("memento_skip_check", {"query": "pager rotation"}))["on_skip_list"] is True
        code, _, _ = error_of(await reader.call_tool("memento_skip_add", {"item": "x", "reason": "y", "expires": in_a_month()}))
        assert code == "forbidden"
        assert error_of(await reader.call_tool("memento_skip_remove", {"id": kept["id"]}))[0] == "forbidden"
    async with mcp_client(server, KEY_A, "mcp-tools") as client:
        assert [e["id"] for e in payload(await client.call_tool("memento_skip_list", {}))["entries"]] == [kept["id"]]


# ---------------------------------------------------------------- the /v1 routes over HTTP


def v1(server: HttpServer, key: str, workspace: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} | ({"X-Memento-Workspace": workspace} if workspace else {})
    return httpx.Client(base_url=server.url + "/v1", headers=headers, timeout=TIMEOUT_S)


@pytest.mark.slow
def test_the_skip_list_routes(server: HttpServer) -> None:
    with v1(server, KEY_A, "rest-routes") as http:
        made = http.post("/skip-list", json={"item": "aurora alerts", "reason": "Kp too low", "expires": in_a_month()})
        assert made.status_code == 201, made.text
        entry = made.json()
        assert http.get("/skip-list").json() == {"entries": [entry], "total": 1}
        hit = http.get("/skip-list/check", params={"query": "aurora"}).json()
        assert hit["on_skip_list"] is True and hit["matches"][0]["id"] == entry["id"] and hit["matches"][0]["match"] == "words"
        assert http.get("/skip-list/check", params={"query": "tides"}).json()["on_skip_list"] is False
        problem_of(http.get("/skip-list/check"), 422)  # the query is required
        bad = problem_of(http.post("/skip-list", json={"item": "x", "reason": "y", "expires": "2001-01-01"}), 400)
        assert "in the past" in bad["detail"]
        problem_of(http.post("/skip-list", json={"item": "x", "reason": "y"}), 422)
        assert http.get("/skip-list").json()["total"] == 1  # the refusals stored nothing
        assert http.delete(f"/skip-list/{entry['id']}").json() == {"id": entry["id"], "removed": True}
        problem_of(http.delete(f"/skip-list/{entry['id']}"), 404)
        assert http.get("/skip-list").json() == {"entries": [], "total": 0}
    schema = httpx.get(server.url + "/v1/openapi.json", timeout=TIMEOUT_S).json()
    assert {"/skip-list", "/skip-list/check", "/skip-list/{skip_id}"} <= set(schema["paths"])


@pytest.mark.slow
def test_the_routes_keep_agents_workspaces_and_read_only_keys_apart(server: HttpServer) -> None:
    with v1(server, KEY_A, "rest-iso") as a, v1(server, KEY_B, "rest-iso") as b, v1(server, KEY_A_READ, "rest-iso") as reader:
        entry = a.post("/skip-list", json={"item": "quarterly report", "reason": "done", "expires": in_a_month()}).json()
        assert (
            b.get("/skip-list").json()["total"] == 0
            and b.get("/skip-list/check", params={"query": "quarterly report"}).json()["matches"] == []
        )
        problem_of(b.delete(f"/skip-list/{entry['id']}"), 404)
        assert reader.get("/skip-list").json()["total"] == 1  # the read-only key of the same agent and workspace reads it
        problem_of(reader.post("/skip-list", json={"item": "x", "reason": "y", "expires": in_a_month()}), 403)
        problem_of(reader.delete(f"/skip-list/{entry['id']}"), 403)
        with v1(server, KEY_A, "another") as elsewhere:
            assert elsewhere.get("/skip-list").json()["total"] == 0  # another workspace of the same agent
        with v1(server, KEY_A) as home:
            assert home.get("/skip-list").json()["total"] == 0  # the agent's own namespace, no workspace
        assert a.get("/skip-list").json()["total"] == 1
    with httpx.Client(base_url=server.url + "/v1", timeout=TIMEOUT_S) as anonymous:
        problem_of(anonymous.get("/skip-list"), 401)
    with v1(server, OPERATOR) as operator:
        scoped = operator.get("/skip-list", params={"agent_id": "agent-a:rest-iso"}).json()
        assert [e["id"] for e in scoped["entries"]] == [entry["id"]]  # the operator names the namespace
