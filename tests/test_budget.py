"""tokenBudget bounds the whole tool result as it is sent (issue 15): recall's and context's JSON,
in the compact view and the verbose one, measured in cl100k tokens on what the server returns,
with structured output off (the JSON once, as text) and on (text and structuredContent)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from memento.app import build_app
from memento.embeddings.hashing import HashEmbedder
from memento.factory import TokenCounter
from memento.mcp import versions
from memento.mcp.server import McpServer
from memento.settings import Settings

COUNTER = TokenCounter()
TOPICS = ("deploy", "database", "billing", "frontend")
TYPES = ("fact", "decision", "error", "procedure", "preference")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=[False, True], ids=["text-only", "structured"])
def server(request: pytest.FixtureRequest, settings: Settings, clock: Any) -> Iterator[McpServer]:
    built = build_app(settings.model_copy(update={"structured_output": request.param}), embedder=HashEmbedder(256), clock=clock)
    yield McpServer(built)
    built.close()


async def call(server: McpServer, session: Any, name: str, arguments: dict[str, Any], n: list[int]) -> dict[str, Any]:
    n[0] += 1
    reply = await server.handle(
        {"jsonrpc": "2.0", "id": n[0], "method": "tools/call", "params": {"name": name, "arguments": arguments}}, session
    )
    assert isinstance(reply, dict)
    result: dict[str, Any] = reply["result"]
    assert result["isError"] is False, result
    return result


def sent_tokens(result: dict[str, Any]) -> int:
    """cl100k tokens of what a client receives as the tool's output: the text block, plus the
    structuredContent JSON when there is one."""
    total = COUNTER.count(result["content"][0]["text"])
    if "structuredContent" in result:
        total += COUNTER.count(json.dumps(result["structuredContent"], ensure_ascii=False, separators=(",", ":")))
    return total


@pytest.mark.anyio
async def test_the_budget_bounds_the_whole_recall_and_context_result(server: McpServer) -> None:
    session = server.create_session()
    n = [0]
    await server.handle(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": versions.LATEST, "capabilities": {}, "clientInfo": {"name": "budget", "version": "1"}},
        },
        session,
    )
    await server.handle({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    ids = []
    for i in range(60):
        words = " ".join(f"detail{j}" for j in range(i % 7 * 6))
        content = f"Memory {i} about the {TOPICS[i % 4]} service: rule number {i} says {words} and the deploy runbook step {i}"
        stored = json.loads(
            (await call(server, session, "remember", {"content": content, "topic": TOPICS[i % 4], "type": TYPES[i % 5]}, n))["content"][0][
                "text"
            ]
        )
        ids.append(stored["id"])
    for a, b in zip(ids[::2], ids[1::2], strict=False):
        await call(server, session, "link", {"fromId": a, "toId": b, "relationType": "related"}, n)

    seen = []
    for budget in (120, 400, 1000, 2500, 8000):
        for verbose in (False, True):
            for label, name, args in (
                ("recall text", "recall", {"text": "deploy service rule", "limit": 40}),
                ("recall keywords", "recall", {"keywords": ["deploy"], "limit": 200}),
                ("context", "context", {"types": list(TYPES)}),
            ):
                result = await call(server, session, name, {**args, "tokenBudget": budget, "verbose": verbose}, n)
                body = json.loads(result["content"][0]["text"])
                sent = sent_tokens(result)
                assert sent <= budget * 1.05, (name, budget, verbose, sent)
                # the reported size is the size sent, within 5% (and never a small budget blown)
                assert abs(body["totalTokens"] - sent) <= max(0.05 * sent, 3), (name, budget, verbose, body["totalTokens"], sent)
                items = body["fragments"] if name == "recall" else body["coreMemory"] + body["workingMemory"]
                seen.append((label, budget, verbose, len(items), sent))
                if name == "recall":
                    keys = set().union(*(f.keys() for f in items)) if items else set()
                    assert ("importance" in keys) == (verbose and bool(items))  # compact unless verbose
                    if not verbose and items:
                        assert keys <= {"id", "type", "topic", "content", "score", "why", "supersededBy", "truncated"}
    # a larger budget returns more, until everything fits
    counts = {(label, verbose): [c for lb, _, v, c, _ in seen if lb == label and v == verbose] for label, _, verbose, _, _ in seen}
    for series in counts.values():
        assert series == sorted(series) and series[-1] > series[0]
    print("\nwhole-result tokens sent per budget (query, budget, verbose, items, tokens):")
    for row in seen:
        print("  ", row)
