"""Graceful shutdown (000 §11.2): SIGTERM in the middle of a burst of concurrent writes.

Several official `mcp` clients write concurrently over Streamable HTTP; SIGTERM arrives while
they are writing. The process must exit within a bounded time after closing its sessions and
flushing (the vector index is saved: a clean shutdown), and after a restart every write whose
tool result was received must be there.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp_helpers import TIMEOUT_S, data, server_env, start_http_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

WRITERS = 6
EXIT_BOUND_S = 12.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def memory(writer: int, n: int) -> dict[str, Any]:
    tag = f"w{writer}n{n}x"
    return {"content": f"Burst write {tag} from writer {writer}", "topic": "burst", "type": "fact", "keywords": [tag, "burst"]}


async def test_sigterm_during_a_write_burst_keeps_every_acknowledged_write(tmp_path: Path) -> None:
    env = {**server_env(tmp_path / "burst.db"), "MEMENTO_SQLITE_SYNCHRONOUS": "FULL", "LOG_DIR": str(tmp_path / "logs")}
    server = start_http_server(env, tmp_path / "first.log")
    acknowledged: dict[str, str] = {}  # tag -> fragment id, only for results received
    failures: list[str] = []
    started_writing = anyio.Event()

    async def writer(index: int) -> None:
        try:
            async with Client(server.mcp, read_timeout_seconds=TIMEOUT_S) as client:
                n = 0
                while True:
                    args = memory(index, n)
                    result = await client.call_tool("remember", args)
                    if result.is_error:
                        failures.append(str(result.content))
                        return
                    acknowledged[args["keywords"][0]] = data(result)["id"]
                    if len(acknowledged) >= WRITERS * 3:
                        started_writing.set()
                    n += 1
        except Exception as exc:  # noqa: BLE001 - the connection ends with the server; that is the point
            failures.append(type(exc).__name__)

    try:
        stopped_at = 0.0
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for index in range(WRITERS):
                    tg.start_soon(writer, index)
                await started_writing.wait()
                server.process.send_signal(signal.SIGTERM)
                stopped_at = time.monotonic()
                code = await anyio.to_thread.run_sync(lambda: server.process.wait(timeout=EXIT_BOUND_S + 5))
                elapsed = time.monotonic() - stopped_at
        assert code in (0, -signal.SIGTERM)
        assert elapsed < EXIT_BOUND_S, f"shutdown took {elapsed:.1f}s"
    except (subprocess.TimeoutExpired, TimeoutError):
        server.crash()
        raise
    log = server.log.read_text()
    assert "HTTP server stopped" in log  # the lifespan's shutdown ran: sessions closed, app closed
    assert sorted((tmp_path / "burst.db.vectors").glob("*.usearch")), "the vector index was not saved"
    assert len(acknowledged) >= WRITERS * 3

    second = start_http_server(env, tmp_path / "second.log")
    try:
        async with Client(second.mcp, read_timeout_seconds=TIMEOUT_S) as client:
            stats = data(await client.call_tool("memory_stats", {}))
            assert stats["total"] >= len(acknowledged)  # plus writes done but never acknowledged
            for tag, fid in acknowledged.items():
                found = data(await client.call_tool("recall", {"keywords": [tag]}))
                assert [f["id"] for f in found["fragments"]] == [fid], f"acknowledged write {tag} lost"
    finally:
        second.stop()
