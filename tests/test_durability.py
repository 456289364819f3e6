"""Acknowledged writes survive a crash.

The HTTP server runs on a real SQLite file (default synchronous=FULL). Writes are made through the
official `mcp` client; once a tool result has been received the write counts as acknowledged.
The server is then killed with SIGKILL (no shutdown code runs: the vector index is never saved,
buffered statistics are lost), a new server process is started on the same file, and every
acknowledged write must be there, findable by keyword, by full text and by meaning alone.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp_helpers import TIMEOUT_S, HttpServer, data, error_of, server_env, start_http_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

COLOURS = ["crimson", "teal", "amber", "violet", "olive"]
COUNT = 40


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Servers:
    """Starts servers on one database file and kills whatever is still running at teardown."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.database = folder / "durable.db"
        self.env = {**server_env(self.database), "MEMENTO_SQLITE_SYNCHRONOUS": "FULL"}
        self.started: list[HttpServer] = []

    def start(self) -> HttpServer:
        server = start_http_server(self.env, self.folder / f"server-{len(self.started)}.log")
        self.started.append(server)
        return server

    def saved_indexes(self) -> list[Path]:
        folder = self.database.with_name(self.database.name + ".vectors")
        return sorted(folder.glob("*.usearch")) if folder.exists() else []

    def close(self) -> None:
        for server in self.started:
            server.crash()


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    running = Servers(tmp_path)
    try:
        yield running
    finally:
        running.close()


def tag(i: int) -> str:
    return f"s{i:02d}q"


def memory(i: int) -> dict[str, Any]:
    return {
        "content": f"Ledger shard {tag(i)} lives on the {COLOURS[i % 5]} replica set",
        "topic": "ledger",
        "type": "fact",
        "keywords": [tag(i), "durability"],
    }


BACKUP = {
    "content": "The nightly backup of the invoicing database runs at 02:30 UTC on the archive host",
    "topic": "ops",
    "type": "procedure",
}


def kill(server: HttpServer) -> None:
    assert server.process.poll() is None, "the server died before it was killed"
    assert server.crash() == -signal.SIGKILL
    assert "HTTP server stopped" not in server.log.read_text()  # no shutdown code ran


async def test_acknowledged_writes_survive_sigkill(servers: Servers) -> None:
    first = servers.start()
    acknowledged: dict[int, str] = {}
    async with Client(first.mcp, read_timeout_seconds=TIMEOUT_S) as client:
        for i in range(COUNT - 1):
            result = data(await client.call_tool("remember", memory(i)))
            assert result["created"] is True  # its vector comes from the embedding worker (embedded says whether yet)
            acknowledged[i] = result["id"]
        backup = data(await client.call_tool("remember", BACKUP))
        assert backup["created"] is True
        acknowledged[COUNT - 1] = backup["id"]
        # Load the vector index in this process so there is unsaved in-memory state to lose.
        warm = data(await client.call_tool("recall", {"verbose": True, "text": "invoicingdatabase nightlybackup"}))
        assert warm["fragments"][0]["id"] == backup["id"]
        kill(first)
    assert len(set(acknowledged.values())) == COUNT
    assert servers.saved_indexes() == []  # the index was never saved: it must be rebuilt

    second = servers.start()
    async with Client(second.mcp, read_timeout_seconds=TIMEOUT_S) as client:
        stats = await stats_once_embedded(client, COUNT)
        assert stats["total"] == COUNT and stats["embedded"] == COUNT
        assert stats["byType"]["fact"] == COUNT - 1 and stats["byType"]["procedure"] == 1

        for i in range(COUNT - 1):
            fid = acknowledged[i]
            by_keyword = data(await client.call_tool("recall", {"verbose": True, "keywords": [tag(i)]}))
            assert [f["id"] for f in by_keyword["fragments"]] == [fid]
            assert by_keyword["fragments"][0]["content"] == memory(i)["content"]
            by_text = data(await client.call_tool("recall", {"verbose": True, "text": f"where does shard {tag(i)} live?"}))
            assert by_text["tiers"]["text"] >= 1
            assert by_text["fragments"][0]["id"] == fid

        listed = data(await client.call_tool("recall", {"verbose": True, "keywords": ["durability"], "limit": 200, "tokenBudget": 100_000}))
        assert {f["id"] for f in listed["fragments"]} == {acknowledged[i] for i in range(COUNT - 1)}

        # Full text finds the backup procedure by a word of its content...
        full_text = data(await client.call_tool("recall", {"verbose": True, "text": "invoicing backup schedule"}))
        assert full_text["tiers"]["text"] >= 1
        assert full_text["fragments"][0]["id"] == acknowledged[COUNT - 1]
        # ...and a query no full-text term matches finds it by vector similarity alone, so the
        # vector index was rebuilt from the embeddings stored in the database.
        semantic = data(await client.call_tool("recall", {"verbose": True, "text": "invoicingdatabase nightlybackup"}))
        assert semantic["tiers"]["keywords"] == 0 and semantic["tiers"]["text"] == 0
        assert semantic["tiers"]["semantic"] == COUNT
        top = semantic["fragments"][0]
        assert top["id"] == acknowledged[COUNT - 1]
        assert top["recallReason"].startswith("semantic similarity") and top["similarity"] > 0.2
    assert second.stop() in (0, -signal.SIGTERM)
    assert len(servers.saved_indexes()) == 1  # a clean shutdown does save it


async def stats_once_embedded(client: Client, count: int) -> dict[str, Any]:
    """memory_stats once `count` memories are embedded (or TIMEOUT_S has passed). A text is
    embedded off the write path: a server killed before its outbox entry was done (a busy
    machine) leaves the entry, and the restarted server embeds it."""
    stats: dict[str, Any] = data(await client.call_tool("memory_stats", {}))
    deadline = anyio.current_time() + TIMEOUT_S
    while stats["embedded"] < count and anyio.current_time() < deadline:
        await anyio.sleep(0.2)
        stats = data(await client.call_tool("memory_stats", {}))
    return stats


async def test_acknowledged_amend_and_forget_survive_sigkill(servers: Servers) -> None:
    first = servers.start()
    async with Client(first.mcp, read_timeout_seconds=TIMEOUT_S) as client:
        kept = data(await client.call_tool("remember", memory(1)))["id"]
        amended = data(await client.call_tool("remember", memory(2)))["id"]
        forgotten = data(await client.call_tool("remember", memory(3)))["id"]
        cause = data(await client.call_tool("remember", BACKUP))["id"]
        linked = data(await client.call_tool("link", {"fromId": amended, "toId": cause, "relationType": "caused_by"}))
        assert linked["relationType"] == "caused_by"

        new_content = "Ledger shard s02q moved to the cobalt replica set after the migration"
        change = data(
            await client.call_tool("amend", {"id": amended, "content": new_content, "importance": 0.85, "keywords": ["s02q", "cobalt"]})
        )
        assert change["id"] == amended and change["versionArchived"] is True
        gone = data(await client.call_tool("forget", {"id": forgotten}))
        assert gone["deleted"] == [forgotten]
        kill(first)

    second = servers.start()
    async with Client(second.mcp, read_timeout_seconds=TIMEOUT_S) as client:
        stats = await stats_once_embedded(client, 3)
        assert stats["total"] == 3 and stats["links"] == 1 and stats["embedded"] == 3

        # The forget: gone by id, by keyword and by text.
        code, message, _ = error_of(await client.call_tool("forget", {"id": forgotten}))
        assert code == "not_found" and forgotten in message
        by_keyword = data(await client.call_tool("recall", {"verbose": True, "keywords": [tag(3)]}))
        assert by_keyword["tiers"]["keywords"] == 0
        assert forgotten not in {f["id"] for f in by_keyword["fragments"]}
        by_text = data(await client.call_tool("recall", {"verbose": True, "text": f"shard {tag(3)}"}))
        assert forgotten not in {f["id"] for f in by_text["fragments"]}

        # The amend: new content, importance (hence tier) and keywords; the link kept.
        found = data(await client.call_tool("recall", {"verbose": True, "keywords": ["cobalt"]}))["fragments"]
        assert found[0]["id"] == amended
        assert found[0]["content"] == new_content and found[0]["importance"] == 0.85
        assert found[0]["ttlTier"] == "permanent" and "cobalt" in found[0]["keywords"]
        by_text = data(await client.call_tool("recall", {"verbose": True, "text": "cobalt migration"}))
        assert by_text["tiers"]["text"] >= 1 and by_text["fragments"][0]["id"] == amended
        old_words = data(await client.call_tool("recall", {"verbose": True, "text": "amber"}))  # the old content
        assert old_words["tiers"]["text"] == 0
        semantic = data(await client.call_tool("recall", {"verbose": True, "text": "cobaltreplica migrationset"}))
        assert semantic["tiers"]["text"] == 0
        assert semantic["fragments"][0]["id"] == amended
        graph = data(await client.call_tool("graph_explore", {"startId": amended}))
        assert graph["edges"] == [{"from": amended, "to": cause, "relation": "caused_by"}]

        # The untouched fragment is as it was.
        untouched = data(await client.call_tool("recall", {"verbose": True, "keywords": [tag(1)]}))["fragments"]
        assert [(f["id"], f["content"]) for f in untouched] == [(kept, memory(1)["content"])]
