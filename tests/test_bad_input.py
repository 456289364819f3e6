"""Bad tool calls through the official `mcp` client against the real server process.

Every bad call must come back as a tool error (`isError: true`, not a protocol error) whose
message names the problem, and must leave the store exactly as it was. On SQLite and on
PostgreSQL + Redis.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from conftest import StoreEnv
from mcp import Client
from mcp_helpers import TIMEOUT_S, HttpServer, assert_backend, data, error_of, server_env, start_http_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.backends("sqlite", "postgres+redis")]

UNKNOWN = "frag-0000000000000000"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, module_store_env: StoreEnv, backend: str) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("bad-input")
    running = start_http_server(server_env(module_store_env(folder)), folder / "server.log")
    try:
        assert_backend(running, backend)
        yield running
    finally:
        running.stop()


# The known fragments every case runs against. `remember` is idempotent on content, so each test
# seeds them again and gets the same ids without changing the store.
SEED: dict[str, dict[str, Any]] = {
    "error": {
        "content": "Checkout pods crash with OOMKilled when the cart cache warms up",
        "topic": "checkout",
        "type": "error",
        "keywords": ["oomkilled", "checkout"],
    },
    "fix": {
        "content": "Raise the checkout memory limit to 1Gi and cap the cart cache at 256MB",
        "topic": "checkout",
        "type": "procedure",
        "keywords": ["oomkilled", "memory"],
    },
    "fact": {"content": "The cart cache is keyed by customer id and region", "topic": "prefs", "type": "fact", "keywords": ["cart"]},
    "pref": {
        "content": "The team prefers blue-green deploys for the checkout service",
        "topic": "prefs",
        "type": "preference",
        "keywords": ["deploys"],
    },
}


async def seed(client: Client) -> dict[str, str]:
    ids = {name: data(await client.call_tool("remember", args))["id"] for name, args in SEED.items()}
    data(await client.call_tool("link", {"fromId": ids["error"], "toId": ids["fix"], "relationType": "resolved_by"}))
    return ids


FRAGMENT_FIELDS = (
    "id",
    "content",
    "topic",
    "type",
    "keywords",
    "importance",
    "ttlTier",
    "isAnchor",
    "linkedTo",
    "source",
    "scope",
    "createdAt",
)


async def snapshot(client: Client, ids: dict[str, str]) -> dict[str, Any]:
    """What must not change: the statistics and the known fragments as recall shows them."""
    stats = data(await client.call_tool("memory_stats", {}))
    recalled = data(
        await client.call_tool(
            "recall",
            {
                "keywords": ["oomkilled", "cart", "deploys", "memory"],
                "limit": 200,
                "tokenBudget": 100_000,
                "includeLinks": False,
                "verbose": True,
            },
        )
    )
    fragments = sorted(({k: f[k] for k in FRAGMENT_FIELDS} for f in recalled["fragments"]), key=lambda f: f["id"])
    graph = data(await client.call_tool("graph_explore", {"startId": ids["error"]}))
    return {
        "stats": {k: stats[k] for k in ("total", "workingMemory", "byTier", "byType", "links", "anchors", "embedded", "meanImportance")},
        "fragments": fragments,
        "graph": {"nodes": sorted(n["id"] for n in graph["nodes"]), "edges": graph["edges"]},
    }


@dataclass(frozen=True)
class Case:
    id: str
    tool: str
    arguments: dict[str, Any]
    code: str
    mentions: tuple[str, ...]  # substrings the message must contain
    refs: dict[str, str] = field(default_factory=dict)  # argument -> seeded fragment name

    def resolve(self, ids: dict[str, str]) -> dict[str, Any]:
        return {**self.arguments, **{arg: ids[name] for arg, name in self.refs.items()}}


def remember(**overrides: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"content": "A new fragment that must not be stored", "topic": "bad", "type": "fact"}
    args.update(overrides)
    return {k: v for k, v in args.items() if v is not ...}


INVALID = "invalid_argument"
CASES = [
    # ---- wrong types (the models are strict: nothing is coerced)
    Case("remember-content-number", "remember", remember(content=42), INVALID, ("content", "valid string")),
    Case("remember-importance-string", "remember", remember(importance="0.5"), INVALID, ("importance", "valid number")),
    Case("remember-keywords-string", "remember", remember(keywords="postgres"), INVALID, ("keywords", "valid array")),
    Case("remember-keyword-item-number", "remember", remember(keywords=["ok", 7]), INVALID, ("keywords.1", "valid string")),
    Case("remember-isAnchor-yes", "remember", remember(isAnchor="yes"), INVALID, ("isAnchor", "valid boolean")),
    Case("recall-tokenBudget-string", "recall", {"text": "cart", "tokenBudget": "100"}, INVALID, ("tokenBudget", "valid integer")),
    Case("context-tokenBudget-string", "context", {"tokenBudget": "100"}, INVALID, ("tokenBudget", "valid integer")),
    Case("amend-isAnchor-yes", "amend", {"isAnchor": "yes"}, INVALID, ("isAnchor", "boolean"), {"id": "fact"}),
    Case("forget-force-string", "forget", {"force": "true"}, INVALID, ("force", "boolean"), {"id": "pref"}),
    # ---- enums and ranges
    Case("remember-type-memo", "remember", remember(type="memo"), INVALID, ("type", "'fact'", "'episode'")),
    Case("recall-type-memo", "recall", {"type": "memo"}, INVALID, ("type", "'fact'")),
    Case("remember-importance-negative", "remember", remember(importance=-0.1), INVALID, ("importance", "greater than or equal to 0")),
    Case("remember-importance-above-one", "remember", remember(importance=1.5), INVALID, ("importance", "less than or equal to 1")),
    Case("amend-importance-above-one", "amend", {"importance": 1.5}, INVALID, ("importance", "less than or equal to 1"), {"id": "fix"}),
    Case(
        "link-relationType-unknown",
        "link",
        {"relationType": "blocks"},
        INVALID,
        ("relationType", "'resolved_by'"),
        {"fromId": "fact", "toId": "pref"},
    ),
    # ---- missing required arguments
    Case("remember-missing-content", "remember", remember(content=...), INVALID, ("content: Field required",)),
    Case("remember-missing-topic", "remember", remember(topic=...), INVALID, ("topic: Field required",)),
    Case("remember-missing-type", "remember", remember(type=...), INVALID, ("type: Field required",)),
    Case("link-missing-fromId", "link", {}, INVALID, ("fromId: Field required",), {"toId": "fix"}),
    Case("link-missing-toId", "link", {}, INVALID, ("toId: Field required",), {"fromId": "error"}),
    Case("amend-missing-id", "amend", {"importance": 0.2}, INVALID, ("id: Field required",)),
    Case("graph_explore-missing-startId", "graph_explore", {}, INVALID, ("startId: Field required",)),
    Case(
        "tool_feedback-missing-relevant",
        "tool_feedback",
        {"tool_name": "recall", "sufficient": True},
        INVALID,
        ("relevant: Field required",),
    ),
    # ---- unknown ids
    Case("forget-unknown-id", "forget", {"id": UNKNOWN}, "not_found", (UNKNOWN,)),
    Case("amend-unknown-id", "amend", {"id": UNKNOWN, "importance": 0.2}, "not_found", (UNKNOWN,)),
    Case("link-unknown-fromId", "link", {"fromId": UNKNOWN}, "not_found", (UNKNOWN,), {"toId": "fix"}),
    Case("link-unknown-toId", "link", {"toId": UNKNOWN}, "not_found", (UNKNOWN,), {"fromId": "error"}),
    Case("graph_explore-unknown-id", "graph_explore", {"startId": UNKNOWN}, "not_found", (UNKNOWN,)),
    Case("remember-linkedTo-unknown", "remember", remember(linkedTo=[UNKNOWN]), "not_found", ("linkedTo", UNKNOWN)),
    Case(
        "remember-linkedTo-known-and-unknown", "remember", {}, "not_found", ("linkedTo", UNKNOWN)
    ),  # arguments built in the test: a real id plus an unknown one
    # ---- empty and oversize content
    Case("remember-content-empty", "remember", remember(content=""), INVALID, ("content", "must not be empty or whitespace")),
    Case("remember-content-whitespace", "remember", remember(content="   "), INVALID, ("content", "must not be empty or whitespace")),
    Case(
        "amend-content-whitespace", "amend", {"content": " \n\t "}, INVALID, ("content", "must not be empty or whitespace"), {"id": "fact"}
    ),
    Case("remember-content-oversize", "remember", remember(content="x" * 20_001), INVALID, ("content", "at most 20000 characters")),
    Case("amend-content-oversize", "amend", {"content": "y" * 20_001}, INVALID, ("content", "at most 20000 characters"), {"id": "fact"}),
    Case("remember-topic-whitespace", "remember", remember(topic="   "), INVALID, ("topic", "at least 1 character")),
    # ---- unknown arguments
    Case("remember-extra-argument", "remember", remember(colour="red"), INVALID, ("colour", "Extra inputs are not permitted")),
    Case("recall-extra-argument", "recall", {"text": "cart", "search": "cart"}, INVALID, ("search", "Extra inputs are not permitted")),
    Case("recall-text-and-query-differ", "recall", {"text": "cart", "query": "checkout"}, INVALID, ("same parameter",)),
    Case("memory_stats-extra-argument", "memory_stats", {"verbose": True}, INVALID, ("verbose", "Extra inputs are not permitted")),
    # ---- refused by the service
    Case("forget-neither-id-nor-topic", "forget", {}, INVALID, ("'id'", "'topic'")),
    Case("forget-both-id-and-topic", "forget", {"topic": "prefs"}, INVALID, ("'id'", "'topic'"), {"id": "fact"}),
    Case("forget-preference-without-force", "forget", {}, "forbidden", ("force=true",), {"id": "pref"}),
    Case(
        "forget-topic-with-preference-without-force", "forget", {"topic": "prefs"}, "forbidden", ("force=true", "nothing deleted")
    ),  # all or nothing: the fact in the topic stays too
    Case("amend-nothing-to-change", "amend", {}, INVALID, ("nothing to amend",), {"id": "fact"}),
    Case("link-to-itself", "link", {}, INVALID, ("itself",), {"fromId": "fact", "toId": "fact"}),
]


# Arguments that pass validation and are refused by the service itself.
SERVICE_REFUSALS = {"forget-neither-id-nor-topic", "forget-both-id-and-topic", "amend-nothing-to-change", "link-to-itself"}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_bad_call_is_a_tool_error_and_changes_nothing(server: HttpServer, case: Case) -> None:
    async with Client(server.mcp, read_timeout_seconds=TIMEOUT_S) as client:
        ids = await seed(client)
        before = await snapshot(client, ids)
        assert before["stats"]["total"] >= len(SEED)
        assert {f["id"] for f in before["fragments"]} >= set(ids.values())

        arguments = case.resolve(ids)
        if case.id == "remember-linkedTo-known-and-unknown":
            arguments = remember(linkedTo=[ids["fix"], UNKNOWN])
        result = await client.call_tool(case.tool, arguments)
        code, message, text = error_of(result)
        assert code == case.code, text
        if case.id not in SERVICE_REFUSALS:
            assert message.startswith(f"invalid arguments for {case.tool}: ") == (code == INVALID)
        for needle in case.mentions:
            assert needle in message, (needle, message)

        assert await snapshot(client, ids) == before


@pytest.mark.parametrize("length", [301, 5_000, 20_000])
async def test_long_content_is_stored_truncated(server: HttpServer, length: int) -> None:
    words = f"Truncation check {length}: " + " ".join(f"w{i}" for i in range(length))
    content = words[:length]
    assert len(content) == length
    async with Client(server.mcp, read_timeout_seconds=TIMEOUT_S) as client:
        total_before = data(await client.call_tool("memory_stats", {}))["total"]
        stored = data(
            await client.call_tool("remember", {"content": content, "topic": "truncation", "type": "fact", "keywords": [f"trunc{length}"]})
        )
        assert stored["created"] is True
        # the result says the content was cut, and how long it was
        assert stored["truncated"] is True and stored["originalLength"] == length
        found = data(await client.call_tool("recall", {"keywords": [f"trunc{length}"], "verbose": True, "tokenBudget": 100_000}))
        fragment = next(f for f in found["fragments"] if f["id"] == stored["id"])
        assert len(fragment["content"]) <= 300 and fragment["content"].endswith("…")
        assert content.startswith(fragment["content"][:-1])
        assert len(fragment["content"]) >= 290  # only trailing whitespace before the cut is dropped
        assert fragment["detail"] == content.strip()  # nothing lost: the full text is kept
        compact = data(await client.call_tool("recall", {"keywords": [f"trunc{length}"]}))
        assert [(f["content"], f.get("truncated")) for f in compact["fragments"] if f["id"] == stored["id"]] == [
            (fragment["content"], True)
        ]
        assert data(await client.call_tool("memory_stats", {}))["total"] == total_before + 1
        short = data(await client.call_tool("remember", {"content": f"short and whole {length}", "topic": "truncation", "type": "fact"}))
        assert "truncated" not in short and "originalLength" not in short
