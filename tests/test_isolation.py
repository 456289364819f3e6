"""The isolation matrix: two agents with their own keys on one real server, over HTTP.

Agent B stores fragments; agent A (read-write key, then read-only key) tries every tool,
resource, prompt and completion against them. Nothing of B's may appear in anything A gets
back (no leak), and B's store, seen through B's own key, must be byte-for-byte what it was
(no change). The read-only key must be refused by every writing tool. The operator's working
memory stays the operator's (recall, context, resources, completion); a session id belongs to
the namespace that first used it, and a session's end takes only its owner's rows; agent keys
change the shared pool only as MEMENTO_SHARED_POOL allows (`read` and `write`). On SQLite and
on PostgreSQL + Redis.

Snapshots compare resource reads, which flush buffered access statistics first (the service's
views), so a batched flush landing between two snapshots cannot make them differ.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote

import pytest
from conftest import StoreEnv
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client  # its defining module (__all__)
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_helpers import TIMEOUT_S, HttpServer, assert_backend, data, error_of, server_env, start_http_server
from mcp_types import PromptReference, ResourceTemplateReference, TextResourceContents

from memento.mcp.resources import working_memory_uri

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.backends("sqlite", "postgres+redis")]

KEY_A = "isolation-key-agent-a-0123456789"
KEY_A_RO = "isolation-key-agent-a-readonly-01"
KEY_B = "isolation-key-agent-b-0123456789"
OPERATOR_KEY = "isolation-operator-key-0123456789"
KEYS = [
    {"name": "agent-a", "key": KEY_A, "agent": "agent-a", "access": "read-write"},
    {"name": "agent-a-ro", "key": KEY_A_RO, "agent": "agent-a", "access": "read-only"},
    {"name": "agent-b", "key": KEY_B, "agent": "agent-b", "access": "read-write"},
]

# B's memories: every marker is a string that must never reach A.
B_TOPIC = "zanzibar-vault"
B_FRAGMENTS = [
    {
        "content": "The zanzibar vault combination is quokka marmalade seven",
        "topic": B_TOPIC,
        "type": "fact",
        "keywords": ["quokkasecret", "zanzibar"],
    },
    {
        "content": "Zanzibar deploys fail with FlamingoOverflow when the vault rotates",
        "topic": B_TOPIC,
        "type": "error",
        "keywords": ["flamingooverflow", "zanzibar"],
    },
    {
        "content": "Agent B prefers the narwhal pipeline for zanzibar releases",
        "topic": "narwhal-prefs",
        "type": "preference",
        "keywords": ["narwhalpipe"],
    },
]
B_MARKERS = [
    "zanzibar",
    "Zanzibar",
    "quokka",
    "marmalade",
    "FlamingoOverflow",
    "flamingooverflow",
    "narwhal",
    "quokkasecret",
    "narwhalpipe",
]
A_FRAGMENT = {
    "content": "Agent A runs the penguin build on Tuesdays",
    "topic": "penguin-builds",
    "type": "procedure",
    "keywords": ["penguin"],
}
WRITE_TOOLS = (
    "remember",
    "amend",
    "forget",
    "link",
    "reflect",
    "tool_feedback",
    "memory_consolidate",
    "restore",
    "feedback",
    "summarize_thread",
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def pool_mode(request: pytest.FixtureRequest) -> str:
    """MEMENTO_SHARED_POOL of the server; `read` unless a test asks for another (indirect)."""
    return str(getattr(request, "param", "read"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, module_store_env: StoreEnv, backend: str, pool_mode: str) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("isolation")
    env = {
        **server_env(module_store_env(folder)),
        "MEMENTO_KEYS": json.dumps(KEYS),
        "MEMENTO_ACCESS_KEY": OPERATOR_KEY,
        "MEMENTO_SHARED_POOL": pool_mode,
    }
    running = start_http_server(env, folder / "server.log")
    try:
        assert_backend(running, backend)
        yield running
    finally:
        running.stop()


@asynccontextmanager
async def connect(server: HttpServer, key: str) -> AsyncIterator[Client]:
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as http:
        transport = streamable_http_client(server.mcp, http_client=http)
        # Classic sessions (Mcp-Session-Id, working memory ended by DELETE): what these tests are about.
        async with Client(transport, read_timeout_seconds=TIMEOUT_S, mode="legacy") as client:
            yield client


def dump(value: Any) -> str:
    if hasattr(value, "model_dump_json"):
        return str(value.model_dump_json())
    return str(value)


class Probe:
    """Runs A's attempts and records everything A gets back."""

    def __init__(self, client: Client, secrets: list[str]) -> None:
        self.client = client
        self.secrets = secrets
        self.seen: list[tuple[str, str]] = []

    def check(self, label: str, reply: str, echoed: list[str]) -> None:
        # What A sent may be echoed back (e.g. "fragment 'frag-…' not found"); nothing else of B's.
        for value in sorted(echoed, key=len, reverse=True):
            reply = reply.replace(value, "<arg>")
        leaked = [secret for secret in self.secrets if secret in reply]
        assert not leaked, f"{label} leaked {leaked}: {reply[:2000]}"
        self.seen.append((label, reply))

    async def tool(self, name: str, arguments: dict[str, Any]) -> Any:
        result = await self.client.call_tool(name, arguments)
        self.check(f"tools/call {name} {arguments}", dump(result), _strings(arguments))
        return result

    async def call(self, label: str, echoed: list[str], make: Any) -> Any:
        try:
            result = await make()
        except MCPError as exc:
            self.check(label, f"error {exc}", echoed)
            return exc
        self.check(label, dump(result), echoed)
        return result


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


async def snapshot(client: Client) -> dict[str, Any]:
    """Everything B's own key can see, without touching access statistics."""
    listed: list[str] = []
    cursor = None
    while True:
        page = await client.list_resources(cursor=cursor, cache_mode="refresh")
        # the session's own working memory is per session, not part of the store
        listed += [str(r.uri) for r in page.resources if not str(r.uri).startswith("memory://sessions/")]
        cursor = page.next_cursor
        if not cursor:
            break
    contents = {}
    for uri in sorted(listed):
        read = await client.read_resource(uri, cache_mode="refresh")
        contents[uri] = [c.model_dump() for c in read.contents]
    return contents


ACCESS_STATISTICS = ("accessCount", "accessedAt")


def split_access(snap: dict[str, Any]) -> tuple[dict[str, Any], dict[str, tuple[Any, ...]]]:
    """A snapshot without access statistics, and those statistics by fragment id: reads (a
    read-only key's recall included) legitimately update them, so they are asserted apart."""
    stats: dict[str, tuple[Any, ...]] = {}

    def strip(value: Any) -> Any:
        if isinstance(value, list):
            return [strip(v) for v in value]
        if not isinstance(value, dict):
            return value
        if "id" in value and "accessCount" in value:
            stats[value["id"]] = tuple(value[k] for k in ACCESS_STATISTICS)
        return {k: strip(v) for k, v in value.items() if k not in ACCESS_STATISTICS}

    rest = {uri: [{**c, "text": json.dumps(strip(json.loads(c["text"])))} for c in contents] for uri, contents in snap.items()}
    return rest, stats


def assert_code(result: Any, *codes: str) -> str:
    code, _, _ = error_of(result)
    assert code in codes, (code, codes)
    return code


async def test_isolation_matrix(server: HttpServer) -> None:
    # ---- B stores its memories (in its own namespace: its key binds it to agent-b)
    async with connect(server, KEY_B) as b:
        b_ids = [data(await b.call_tool("remember", f))["id"] for f in B_FRAGMENTS]
        data(await b.call_tool("link", {"fromId": b_ids[1], "toId": b_ids[0], "relationType": "related"}))
        # keywords alone also search the full text: the third memory says "zanzibar" too
        assert {data(await b.call_tool("recall", {"keywords": ["zanzibar"]}))["count"]} == {3}
        # 004 §5.1: one memory forgotten softly (restorable), one erased with a receipt
        b_soft = data(
            await b.call_tool("remember", {"content": "Zanzibar quokka spare key under the mat", "topic": B_TOPIC, "type": "fact"})
        )
        assert data(await b.call_tool("forget", {"id": b_soft["id"]}))["count"] == 1
        b_hard = data(await b.call_tool("remember", {"content": "Zanzibar note to erase", "topic": B_TOPIC, "type": "fact"}))
        b_receipt = data(await b.call_tool("forget", {"id": b_hard["id"], "mode": "hard"}))["receipt"]
        before = await snapshot(b)
        assert before == await snapshot(b)  # the snapshot itself changes nothing
        assert any(b_ids[0] in uri for uri in before)
        b_stats = data(await b.call_tool("memory_stats", {}))
        assert b_stats["total"] == 3

    secrets = [*b_ids, *B_MARKERS, b_soft["id"], "spare key under the mat"]
    fake = "frag-" + "0" * (len(b_ids[0]) - 5)

    # ---- A (read-write) tries everything
    async with connect(server, KEY_A) as a_client:
        a = Probe(a_client, secrets)
        own = data(await a.tool("remember", A_FRAGMENT))["id"]

        # recall by text, keywords, topic, type; with B's agentId refused
        for query in (
            {"text": "zanzibar vault combination"},
            {"keywords": ["zanzibar", "quokkasecret"]},
            {"topic": B_TOPIC},
            {"type": "fact"},
            {"type": "error"},
            {"text": "narwhal pipeline"},
            {"keywords": ["penguin"], "includeLinks": True},
        ):
            found = data(await a.tool("recall", {**query, "verbose": True}))
            assert all(f["agentId"] in ("agent-a", "default") for f in found["fragments"])
        assert_code(await a.tool("recall", {"text": "zanzibar", "agentId": "agent-b"}), "forbidden")

        # B's fragment ids are as unknown as ids that never existed
        for fid in (b_ids[0], fake):
            assert_code(await a.tool("amend", {"id": fid, "content": "overwritten by agent A"}), "not_found")
            assert_code(await a.tool("amend", {"id": fid, "content": "x", "supersedes": True}), "not_found")
            assert_code(await a.tool("forget", {"id": fid, "force": True}), "not_found")
            assert_code(await a.tool("link", {"fromId": own, "toId": fid}), "not_found")
            assert_code(await a.tool("link", {"fromId": fid, "toId": own}), "not_found")
            assert_code(await a.tool("graph_explore", {"startId": fid, "depth": 3}), "not_found")
            assert_code(await a.tool("feedback", {"id": fid, "event": "not_helpful", "note": "planted by A"}), "not_found")
        forgot = await a.tool("forget", {"topic": B_TOPIC, "force": True})
        assert data(forgot)["count"] == 0
        # 004 §5.1: neither B's soft-forgotten memory, nor B's memories, nor B's receipt
        assert_code(await a.tool("restore", {"id": b_soft["id"]}), "not_found")
        for fid in (b_ids[0], b_soft["id"], fake):
            assert_code(await a.tool("forget", {"id": fid, "mode": "hard", "force": True}), "not_found")
        assert data(await a.tool("forget", {"topic": B_TOPIC, "mode": "hard", "force": True}))["count"] == 0
        verdict = data(await a.tool("verify_erasure", {"receipt": b_receipt}))
        assert verdict["verified"] is False and [c["name"] for c in verdict["checks"]] == ["digest", "onFile"]
        assert_code(await a.tool("verify_erasure", {"receiptId": b_receipt["receiptId"]}), "not_found")
        for name, args in (
            ("amend", {"id": b_ids[0], "content": "x", "agentId": "agent-b"}),
            ("forget", {"id": b_ids[0], "force": True, "agentId": "agent-b"}),
            ("forget", {"id": b_ids[0], "force": True, "mode": "hard", "agentId": "agent-b"}),
            ("restore", {"id": b_soft["id"], "agentId": "agent-b"}),
            ("verify_erasure", {"receiptId": b_receipt["receiptId"], "agentId": "agent-b"}),
            ("link", {"fromId": b_ids[1], "toId": b_ids[2], "agentId": "agent-b"}),
            ("graph_explore", {"startId": b_ids[0], "agentId": "agent-b"}),
            ("feedback", {"id": b_ids[0], "event": "not_helpful", "agentId": "agent-b"}),
            ("remember", {**A_FRAGMENT, "content": "planted by A in B's namespace", "agentId": "agent-b"}),
            ("reflect", {"summary": "planted by A in B's namespace", "agentId": "agent-b"}),
            ("context", {"agentId": "agent-b"}),
            ("memory_stats", {"agentId": "agent-b"}),
            ("memory_consolidate", {"agentId": "agent-b"}),
            ("export", {"agentId": "agent-b"}),
            ("summarize_thread", {"agentId": "agent-b"}),
        ):
            assert_code(await a.tool(name, args), "forbidden")

        # export: A's own memories in every format, page by page; nothing of B's (the Probe checks)
        for fmt in ("ndjson", "markdown", "csv"):
            page = data(await a.tool("export", {"format": fmt, "limit": 1}))
            while page["nextCursor"]:
                page = data(await a.tool("export", {"format": fmt, "cursor": page["nextCursor"], "limit": 1}))
        exported = data(await a.tool("export", {"filters": {"topic": B_TOPIC}}))
        assert exported["count"] == 0 and exported["nextCursor"] is None

        loaded = data(await a.tool("context", {"tokenBudget": 4000, "types": ["fact", "error", "preference", "procedure"]}))
        assert own in json.dumps(loaded)
        stats = data(await a.tool("memory_stats", {}))
        assert stats["total"] == 1  # A's one fragment; B's three are not even counted
        data(await a.tool("reflect", {"summary": "Agent A finished the penguin build"}))
        data(await a.tool("memory_consolidate", {}))
        data(await a.tool("graph_explore", {"startId": own}))
        assert data(await a.tool("feedback", {"id": own, "event": "helpful"}))["counts"] == {"helpful": 1}
        assert data(await a.tool("memory_stats", {}))["feedback"] == {"helpful": 1}  # A's own only

        # resources: list, read B's fragment/topic uris, subscribe
        listed = await a.call("resources/list", [], lambda: a_client.list_resources(cache_mode="refresh"))
        assert all(b_ids[0] not in str(r.uri) for r in listed.resources)
        await a.call("resources/templates/list", [], lambda: a_client.list_resource_templates(cache_mode="refresh"))
        for uri in ("memory://stats", "memory://topics"):
            await a.call(f"read {uri}", [], lambda uri=uri: a_client.read_resource(uri, cache_mode="refresh"))
        for value in (b_ids[0], fake):
            uri = f"memory://fragments/{value}"
            assert isinstance(
                await a.call(f"read {uri}", [uri, value], lambda uri=uri: a_client.read_resource(uri, cache_mode="refresh")), MCPError
            )
        for topic in (B_TOPIC, "narwhal-prefs"):
            uri = f"memory://topics/{topic}"
            assert isinstance(
                await a.call(f"read {uri}", [uri, topic], lambda uri=uri: a_client.read_resource(uri, cache_mode="refresh")), MCPError
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)  # still in 2025-11-25
            for uri in (f"memory://fragments/{b_ids[0]}", f"memory://topics/{B_TOPIC}"):
                await a.call(f"subscribe {uri}", [uri], lambda uri=uri: a_client.subscribe_resource(uri))

        # prompts: memory_injection must not inject B's memories; session_start neither
        for question in ("zanzibar vault combination", "narwhal pipeline releases", "FlamingoOverflow"):
            injected = await a.call(
                f"prompt memory_injection {question}", [question], lambda q=question: a_client.get_prompt("memory_injection", {"query": q})
            )
            assert "No stored memories matched" in dump(injected) or "penguin" in dump(injected)
        await a.call(
            "prompt memory_injection topic",
            [B_TOPIC],
            lambda: a_client.get_prompt("memory_injection", {"query": "vault", "topic": B_TOPIC}),
        )
        await a.call("prompt session_start", [], lambda: a_client.get_prompt("session_start", {}))

        # completion: neither B's fragment ids nor B's topics
        for prefix in ("", "frag-", b_ids[0][:8]):
            done = await a.call(
                f"complete id {prefix!r}",
                [prefix] if prefix else [],
                lambda p=prefix: a_client.complete(
                    ResourceTemplateReference(type="ref/resource", uri="memory://fragments/{id}"), {"name": "id", "value": p}
                ),
            )
            assert all(v == own or v.startswith(prefix) and v not in b_ids for v in done.completion.values)
        for prefix in ("", "z", "n", "zan"):
            await a.call(
                f"complete topic {prefix!r}",
                [prefix] if prefix else [],
                lambda p=prefix: a_client.complete(
                    ResourceTemplateReference(type="ref/resource", uri="memory://topics/{topic}"), {"name": "topic", "value": p}
                ),
            )
            await a.call(
                f"complete prompt topic {prefix!r}",
                [prefix] if prefix else [],
                lambda p=prefix: a_client.complete(
                    PromptReference(type="ref/prompt", name="memory_injection"), {"name": "topic", "value": p}
                ),
            )
        assert len(a.seen) > 60
        a_before = await snapshot(a_client)

    # ---- A's read-only key: reads work, every write is refused, nothing changes
    async with connect(server, KEY_A_RO) as ro_client:
        ro = Probe(ro_client, secrets)
        assert data(await ro.tool("recall", {"keywords": ["penguin"]}))["count"] >= 1
        data(await ro.tool("context", {}))
        data(await ro.tool("graph_explore", {"startId": own}))
        data(await ro.tool("memory_stats", {}))
        data(await ro.tool("recall", {"text": "zanzibar vault"}))
        assert own in data(await ro.tool("export", {}))["text"]  # reading its own export is a read
        for name, args in (
            ("remember", {**A_FRAGMENT, "content": "a read-only key wrote this"}),
            ("remember", {**A_FRAGMENT, "content": "a read-only key wrote this", "scope": "session"}),
            ("amend", {"id": own, "content": "a read-only key changed this"}),
            ("amend", {"id": own, "importance": 0.1}),
            ("forget", {"id": own, "force": True}),
            ("forget", {"topic": "penguin-builds", "force": True}),
            ("forget", {"id": own, "force": True, "mode": "hard"}),
            ("restore", {"id": own}),
            ("link", {"fromId": own, "toId": own}),
            ("reflect", {"summary": "a read-only key reflected"}),
            ("tool_feedback", {"tool_name": "recall", "relevant": True, "sufficient": True}),
            ("memory_consolidate", {}),
            ("feedback", {"id": own, "event": "not_helpful"}),
            ("summarize_thread", {"keep": False}),
        ):
            assert name in WRITE_TOOLS
            result = await ro.tool(name, args)
            code = assert_code(result, "forbidden", "invalid_argument")
            if code == "invalid_argument":  # a malformed call must not be why it failed
                pytest.fail(f"{name} {args}: {error_of(result)}")
        # nothing changed but the access statistics of A's own fragments its recalls found
        after, after_access = split_access(await snapshot(ro_client))
        before_rest, before_access = split_access(a_before)
        assert after == before_rest and after_access.keys() == before_access.keys()
        assert all(after_access[i][0] >= n for i, (n, _) in before_access.items())
        assert after_access[own][0] > before_access[own][0]

    # ---- B's store is exactly what it was
    async with connect(server, KEY_B) as b:
        assert await snapshot(b) == before
        b_after = data(await b.call_tool("memory_stats", {}))
        assert b_after["total"] == 3 and "feedback" not in b_after  # A's attempts left no feedback on B's memories
        again = data(await b.call_tool("recall", {"keywords": ["zanzibar"]}))
        assert sorted(f["id"] for f in again["fragments"] if not f.get("linked")) == sorted(b_ids)
        assert "penguin" not in json.dumps(again)
        assert data(await b.call_tool("verify_erasure", {"receipt": b_receipt}))["verified"] is True
        assert data(await b.call_tool("restore", {"id": b_soft["id"]}))["id"] == b_soft["id"]  # still B's to bring back


# ---------------------------------------------------------------- working memory and sessions


async def own_session_id(client: Client) -> str:
    """The client's MCP session id, as the server lists the session's working memory."""
    listed = await client.list_resources(cache_mode="refresh")
    for resource in listed.resources:
        uri = str(resource.uri)
        if uri.startswith("memory://sessions/"):
            return unquote(uri.removeprefix("memory://sessions/").removesuffix("/working-memory"))
    raise AssertionError("no working-memory resource listed")


async def working_ids(client: Client, session: str) -> list[str]:
    loaded = data(await client.call_tool("context", {"sessionId": session, "types": ["fact"]}))
    return [f["id"] for f in loaded["workingMemory"]]


async def test_an_agent_key_never_reads_the_operators_working_memory(server: HttpServer) -> None:
    async with connect(server, OPERATOR_KEY) as op:
        op_session = await own_session_id(op)
        secret = data(
            await op.call_tool(
                "remember",
                {
                    "content": "Operator scratch: the pelican ledger key is K4471Q",
                    "topic": "pelican-ops",
                    "type": "fact",
                    "keywords": ["pelicanledger"],
                    "scope": "session",
                },
            )
        )["id"]
        assert secret in [f["id"] for f in data(await op.call_tool("recall", {"keywords": ["pelicanledger"]}))["fragments"]]

        async with connect(server, KEY_A) as a_client:
            a = Probe(a_client, [secret, op_session, "pelican", "K4471Q", "k4471q"])  # not "4471": a hex id may hold it
            for query in ({"keywords": ["pelicanledger"]}, {"text": "pelican ledger key"}, {"topic": "pelican-ops"}):
                assert secret not in [f["id"] for f in data(await a.tool("recall", query))["fragments"]]
            assert_code(await a.tool("recall", {"text": "pelican ledger", "sessionId": op_session}), "forbidden")
            assert_code(await a.tool("context", {"sessionId": op_session}), "forbidden")
            assert data(await a.tool("context", {"types": ["fact"]}))["workingMemory"] == []
            assert data(await a.tool("memory_stats", {}))["workingMemory"] == 0
            planted = {
                "content": "planted in the operator's session",
                "topic": "t",
                "type": "fact",
                "scope": "session",
                "sessionId": op_session,
            }
            assert_code(await a.tool("remember", planted), "forbidden")
            for uri in (working_memory_uri(op_session), f"memory://fragments/{secret}"):
                got = await a.call(f"read {uri}", [uri], lambda uri=uri: a_client.read_resource(uri, cache_mode="refresh"))
                assert isinstance(got, MCPError)
            template = ResourceTemplateReference(type="ref/resource", uri="memory://sessions/{sessionId}/working-memory")
            for prefix in ("", op_session[:3]):
                done = await a.call(
                    f"complete sessionId {prefix!r}",
                    [prefix] if prefix else [],
                    lambda p=prefix: a_client.complete(template, {"name": "sessionId", "value": p}),
                )
                assert op_session not in done.completion.values
            done = await a.call(
                "complete id ''",
                [],
                lambda: a_client.complete(
                    ResourceTemplateReference(type="ref/resource", uri="memory://fragments/{id}"), {"name": "id", "value": ""}
                ),
            )
            assert secret not in done.completion.values

        # nothing of it changed, and it is still the operator's
        assert await working_ids(op, op_session) == [secret]


async def test_a_session_id_is_its_first_namespaces_and_its_end_takes_only_its_rows(server: HttpServer) -> None:
    scratch = {"topic": "heron", "type": "fact", "scope": "session"}
    async with connect(server, KEY_B) as b:
        b_task = data(await b.call_tool("remember", {**scratch, "content": "B scratch: heron queue drained", "sessionId": "heron-task"}))[
            "id"
        ]
        async with connect(server, KEY_A) as a:
            a_session = await own_session_id(a)
            # B names A's live MCP session before A wrote anything: B's rows, in B's namespace
            squat = data(await b.call_tool("remember", {**scratch, "content": "B scratch under A's id", "sessionId": a_session}))["id"]
            a_row = data(await a.call_tool("remember", {**scratch, "content": "A scratch: egret build green"}))["id"]
            assert await working_ids(a, a_session) == [a_row]  # A's own session stays A's
            # from now on neither may write into, read or reflect on the other's session
            assert_code(await b.call_tool("remember", {**scratch, "content": "B again under A's id", "sessionId": a_session}), "forbidden")
            assert_code(await b.call_tool("context", {"sessionId": a_session}), "forbidden")
            assert_code(await a.call_tool("remember", {**scratch, "content": "A in B's session", "sessionId": "heron-task"}), "forbidden")
            for name, args in (
                ("recall", {"text": "heron", "sessionId": "heron-task"}),
                ("context", {"sessionId": "heron-task"}),
                ("reflect", {"summary": "A reflects on B's task", "sessionId": "heron-task"}),
            ):
                assert_code(await a.call_tool(name, args), "forbidden")
        # A's MCP session has ended (DELETE): A's working memory went, B's stayed, even under A's id
        assert await working_ids(b, "heron-task") == [b_task]
        kept = data(await b.call_tool("recall", {"text": "scratch under", "sessionId": a_session}))
        assert squat in [f["id"] for f in kept["fragments"]]
    async with connect(server, OPERATOR_KEY) as op:  # the maintenance scope sees every namespace
        left = data(await op.call_tool("recall", {"text": "scratch egret heron", "sessionId": a_session, "agentId": "system"}))
        assert {f["id"] for f in left["fragments"]} & {a_row, squat} == {squat}


# ---------------------------------------------------------------- the shared pool's write rule

POOL_TOPIC = "pool-conventions"


@pytest.mark.parametrize("pool_mode", ["read", "write"], indirect=True, scope="module")
async def test_agent_keys_change_the_shared_pool_only_as_the_rule_allows(server: HttpServer, pool_mode: str) -> None:
    writes = pool_mode == "write"
    fact = {"topic": POOL_TOPIC, "type": "fact"}
    async with connect(server, OPERATOR_KEY) as op:
        plain = data(await op.call_tool("remember", {**fact, "content": "Releases are tagged vMAJOR.MINOR"}))["id"]
        anchor = data(await op.call_tool("remember", {**fact, "content": "Production lives in eu-west-1", "isAnchor": True}))["id"]
        stale = data(
            await op.call_tool(
                "remember",
                {
                    "topic": POOL_TOPIC,
                    "type": "episode",
                    "content": "The 2019 outage post-mortem",
                    "createdAt": (datetime.now(UTC) - timedelta(days=40)).isoformat(),
                },
            )
        )["id"]
        # A recall waits for the embedding worker (the pool is settled); a topic nothing has, so it reads no memory.
        await op.call_tool("recall", {"text": "releases production outage", "topic": "no-such-topic"})
        pool_before = await snapshot(op)

    async with connect(server, KEY_A) as a:
        own = data(await a.call_tool("remember", {"topic": "a-notes", "type": "fact", "content": "Agent A tags with make tag"}))["id"]
        refused = [  # in both modes: anchors, anchoring, pool links to private rows, reflect into the pool
            ("forget", {"id": anchor, "force": True}),
            ("amend", {"id": anchor, "content": "Production moved"}),
            ("amend", {"id": anchor, "content": "Production moved", "supersedes": True}),
            ("amend", {"id": anchor, "importance": 0.1}),
            ("amend", {"id": plain, "isAnchor": True}),
            ("link", {"fromId": anchor, "toId": plain}),
            ("link", {"fromId": plain, "toId": own}),
            ("remember", {**fact, "content": "An anchor planted by A", "isAnchor": True, "agentId": "default"}),
            ("reflect", {"summary": "A reflects into the pool", "agentId": "default"}),
        ]
        if not writes:
            refused += [
                ("remember", {**fact, "content": "Planted by A", "agentId": "default"}),
                ("amend", {"id": plain, "content": "Releases are not tagged"}),
                ("amend", {"id": plain, "content": "Releases are not tagged", "supersedes": True}),
                ("link", {"fromId": plain, "toId": anchor}),
                ("forget", {"id": plain, "force": True}),
                ("forget", {"topic": POOL_TOPIC, "force": True}),
            ]
        for name, args in refused:
            result = await a.call_tool(name, args)
            assert error_of(result)[0] == "forbidden", (name, args, result)
        data(await a.call_tool("link", {"fromId": own, "toId": plain}))  # changes only A's own fragment
        data(await a.call_tool("memory_consolidate", {}))

    async with connect(server, OPERATOR_KEY) as op:
        contents = (await op.read_resource(f"memory://fragments/{stale}")).contents[0]
        assert isinstance(contents, TextResourceContents)
        tier = json.loads(contents.text)["ttlTier"]
        if not writes:
            assert await snapshot(op) == pool_before  # not one byte of the pool changed
            assert tier == "warm"
            return
        assert tier == "cold"  # write: A's consolidation may age the pool's non-anchored rows
        assert (await snapshot(op))[f"memory://fragments/{anchor}"] == pool_before[f"memory://fragments/{anchor}"]

    async with connect(server, KEY_A) as a:  # write: the rest is A's to do

        async def owner(fid: str) -> str:
            contents = (await a.read_resource(f"memory://fragments/{fid}")).contents[0]
            assert isinstance(contents, TextResourceContents)
            agent: str = json.loads(contents.text)["agentId"]
            return agent

        added = data(await a.call_tool("remember", {**fact, "content": "Shared by agent A", "agentId": "default"}))
        assert await owner(added["id"]) == "default"
        data(await a.call_tool("amend", {"id": plain, "content": "Releases are tagged vX.Y"}))
        assert await owner(plain) == "default"
        data(await a.call_tool("link", {"fromId": plain, "toId": anchor}))
        successor = data(await a.call_tool("amend", {"id": plain, "content": "Releases are tagged vX", "supersedes": True}))
        assert await owner(successor["id"]) == "default"
        assert data(await a.call_tool("forget", {"id": added["id"], "force": True}))["count"] == 1
        # by topic: the non-anchored pool fragments go, the anchor is kept (and reported)
        forgot = data(await a.call_tool("forget", {"topic": POOL_TOPIC, "force": True}))
        assert forgot["kept"] == [anchor] and stale in forgot["deleted"]
