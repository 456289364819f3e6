"""A recall beside a stream of writes: what an agent asking its memory meets while another agent (or
itself, in a burst) keeps writing. A real server process (Streamable HTTP, the embedded SQLite
default on a fresh file, the bundled local model unless `--embedder hash`), two official `mcp`
client sessions in one namespace: a writer calling `remember` every `--write-gap-ms` after each
answer, a reader calling `recall` (limit 10) every `--read-gap-ms`. Every remember is embedded
by the server's outbox in the background, on the same two cores as everything else; a recall
embeds its query and may wait (`MEMENTO_EMBED_SETTLE_MS`) for the writes before it.

Prints remember and recall p50 / p95 / p99 and how many calls each made.

    python bench/write_stream.py [--seconds 40] [--write-gap-ms 10] [--read-gap-ms 20] [--warm 200] [--embedder local|hash]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path

import httpx2
from load import BASE_ENV, WORDS, start_server
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


async def stream(url: str, args: argparse.Namespace) -> dict[str, list[float]]:
    rng = random.Random(args.seed)
    times: dict[str, list[float]] = {"remember": [], "recall": []}

    def sentence(k: int) -> str:
        return " ".join(rng.choices(WORDS, k=k))

    async with (
        httpx2.AsyncClient(timeout=120) as h1,
        httpx2.AsyncClient(timeout=120) as h2,
        Client(streamable_http_client(url, http_client=h1), read_timeout_seconds=120) as writer,
        Client(streamable_http_client(url, http_client=h2), read_timeout_seconds=120) as reader,
    ):
        for i in range(args.warm):  # a store to search, embedded before the clock starts
            await writer.call_tool("remember", {"content": f"seed {i}: {sentence(10)}", "topic": "notes", "type": "fact"})
        await reader.call_tool("recall", {"text": "warm up the model", "limit": 10})
        await asyncio.sleep(args.settle_s)
        end = time.monotonic() + args.seconds

        async def timed(client: Client, tool: str, arguments: dict[str, object]) -> None:
            started = time.perf_counter()
            result = await client.call_tool(tool, arguments)
            if result.is_error:
                raise RuntimeError(f"{tool} failed: {result.content}")
            times[tool].append((time.perf_counter() - started) * 1000)

        async def write() -> None:
            i = 0
            while time.monotonic() < end:
                await timed(writer, "remember", {"content": f"note {i}: {sentence(10)}", "topic": "notes", "type": "fact"})
                i += 1
                await asyncio.sleep(args.write_gap_ms / 1000)

        async def read() -> None:
            while time.monotonic() < end:
                await timed(reader, "recall", {"text": f"what about {sentence(4)}?", "limit": 10})
                await asyncio.sleep(args.read_gap_ms / 1000)

        await asyncio.gather(write(), read())
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--write-gap-ms", type=float, default=10.0, help="pause after each remember's answer")
    parser.add_argument("--read-gap-ms", type=float, default=20.0, help="pause after each recall's answer")
    parser.add_argument("--warm", type=int, default=200, help="memories written (and embedded) before the clock starts")
    parser.add_argument("--settle-s", type=float, default=15.0, help="pause before the clock starts: the outbox embeds the warm-up")
    parser.add_argument("--embedder", choices=("local", "hash"), default="local")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memento-stream-") as tmp:
        env = {**BASE_ENV, "EMBEDDING_PROVIDER": args.embedder, "DATABASE_URL": f"sqlite:///{Path(tmp) / 'memento.db'}"}
        server = start_server("stream", env, Path(tmp))
        try:
            times = asyncio.run(stream(server.url, args))
        finally:
            server.stop()
    print(
        f"a recall beside a stream of writes: {args.embedder} embedder, {args.seconds:g} s, a remember every"
        f" {args.write_gap_ms:g} ms after the last answer, a recall every {args.read_gap_ms:g} ms"
    )
    print("| tool | calls | p50 ms | p95 ms | p99 ms |")
    print("| --- | --- | --- | --- | --- |")
    for tool, values in times.items():
        if values:
            print(f"| {tool} | {len(values)} | {pct(values, 50):.1f} | {pct(values, 95):.1f} | {pct(values, 99):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
