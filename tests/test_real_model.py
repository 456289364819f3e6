"""End to end with the real default embedding model: the server as shipped, driven over stdio."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_helpers import SERVE
from mcp_types import CallToolResult, TextContent

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

MEMORIES = [
    ("The quarterly revenue report must be handed in by Friday noon", "finance"),
    ("Our cat refuses to eat anything except salmon", "home"),
    ("고양이는 생선을 아주 좋아한다", "home"),
    ("The CI pipeline caches pip wheels between runs", "ci"),
    ("회의가 길어서 점심을 놓쳤다", "work"),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def data(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result
    block = result.content[0]
    assert isinstance(block, TextContent)
    parsed: dict[str, Any] = json.loads(block.text)
    return parsed


async def test_default_model_finds_memories_by_meaning(tmp_path: Path) -> None:
    # Default provider: the local model. The recall below waits for the writes' embeddings (read-
    # your-writes) for up to MEMENTO_EMBED_SETTLE_MS; on a machine busy with the rest of the
    # suite, 250 ms behind the model's first load was once too short, so the wait is longer here.
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'real.db'}", "MEMENTO_EMBED_SETTLE_MS": "10000"}
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--transport", "stdio"], env=env)
    async with Client(params, read_timeout_seconds=120) as client:
        ids = {}
        for content, topic in MEMORIES:
            result = data(await client.call_tool("remember", {"content": content, "topic": topic, "type": "fact"}))
            ids[content] = result["id"]  # embedded by the server's embedding worker

        # No word in common with the stored text: only the vector tier can find it (the recall waits
        # for the worker, which embeds behind the model's first load).
        found = data(await client.call_tool("recall", {"verbose": True, "text": "When is the financial summary due?", "limit": 3}))
        stats = data(await client.call_tool("memory_stats", {}))
        assert stats["embeddingModel"] == "local:multilingual-e5-small-q4" and stats["embeddingCoverage"] == 1.0
        assert found["fragments"][0]["id"] == ids[MEMORIES[0][0]]
        assert found["tiers"]["text"] == 0 and found["searchMode"] == "hybrid"

        korean = data(await client.call_tool("recall", {"verbose": True, "text": "반려묘가 좋아하는 음식", "limit": 3}))
        top_two = {f["id"] for f in korean["fragments"][:2]}
        assert ids[MEMORIES[2][0]] in top_two
        assert korean["fragments"][0]["similarity"] > 0.5
