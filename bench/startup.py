"""Stdio start-up: how long an agent host waits for its first answers from a fresh server.

    python bench/startup.py [--repeats 10] [--modes auto,legacy] [--embedder local] [--json out.json]

Agent hosts start `memento serve --transport stdio` once per session, so the server's start-up
is paid on every session. Each run starts the server as a child process of the official `mcp`
client on a fresh temporary SQLite store and times, from the moment the client spawns it:
`connect` (the first response: `server/discover` in the default mode, which speaks 2026-07-28,
or `initialize` with `mode="legacy"`), then `recall` (the first search answered, which embeds the
query with the model), then `remember` (the first write acknowledged). Both `python -m memento`
and the installed `memento` entry point (when .venv/bin holds one) are run. One untimed run per
command first warms the file cache. Prints p50/p95/max per phase.

Then where the time goes: `python -X importtime` of the same stdio serve (stdin closed, so it
starts and stops at once), its import time grouped by package (memento by subpackage), and the
model's own cost (loading the engine, the first query embedding) timed in a fresh process.
Default embedder: the bundled local model, what agents run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("connect", "recall", "remember")
CALL_TIMEOUT_S = 120.0
IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)\s*$")

MODEL_PROBE = """
import json, time
t0 = time.perf_counter()
from memento.embeddings.local import LocalE5Embedder
t1 = time.perf_counter()
e = LocalE5Embedder()
e.warm_up()
t2 = time.perf_counter()
e.embed_query("what did we decide about the database?")
t3 = time.perf_counter()
e.embed_query("and the deployment?")
t4 = time.perf_counter()
print(json.dumps({"import_ms": (t1 - t0) * 1e3, "load_ms": (t2 - t1) * 1e3,
                  "first_query_ms": (t3 - t2) * 1e3, "next_query_ms": (t4 - t3) * 1e3}))
"""


def commands() -> dict[str, list[str]]:
    """The ways to start the server: `python -m memento`, and the entry point when installed."""
    found = {"python -m memento": [sys.executable, "-m", "memento"]}
    entry = Path(sys.executable).with_name("memento")
    if entry.exists():
        found["memento"] = [str(entry)]
    return found


def server_env(store: Path, embedder: str) -> dict[str, str]:
    """The server's environment: a fresh SQLite store, the chosen embedder, quiet logs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "EMBEDDING_", "REDIS_"))}
    return {**env, "DATABASE_URL": f"sqlite:///{store}", "EMBEDDING_PROVIDER": embedder, "LOG_LEVEL": "WARNING"}


async def one_start(argv: list[str], mode: str, embedder: str) -> dict[str, float]:
    """Start one server, time its first answers (ms since the spawn), stop it."""
    with tempfile.TemporaryDirectory(prefix="memento-startup-") as tmp:
        params = StdioServerParameters(
            command=argv[0], args=[*argv[1:], "serve", "--transport", "stdio"], env=server_env(Path(tmp) / "m.db", embedder)
        )
        began = time.perf_counter()
        client = Client(params, read_timeout_seconds=CALL_TIMEOUT_S, mode=mode)  # type: ignore[arg-type]
        async with client:
            connected = time.perf_counter()
            recalled = await client.call_tool("recall", {"text": "what did we decide about the database?"})
            recall_done = time.perf_counter()
            remembered = await client.call_tool(
                "remember", {"content": "We chose PostgreSQL for the billing service.", "topic": "database", "type": "decision"}
            )
            remember_done = time.perf_counter()
        for name, result in (("recall", recalled), ("remember", remembered)):
            if result.is_error:
                raise RuntimeError(f"{name} failed: {result.content}")
    return {"connect": (connected - began) * 1e3, "recall": (recall_done - began) * 1e3, "remember": (remember_done - began) * 1e3}


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] if ordered else 0.0


def measure(repeats: int, modes: list[str], embedder: str) -> list[dict[str, Any]]:
    """Per command and mode: p50/p95/max of each phase over `repeats` starts (after one warm-up)."""
    rows = []
    for label, argv in commands().items():
        for mode in modes:
            asyncio.run(one_start(argv, mode, embedder))  # warm the file cache; not counted
            runs = [asyncio.run(one_start(argv, mode, embedder)) for _ in range(repeats)]
            row: dict[str, Any] = {"command": label, "mode": mode, "repeats": repeats}
            for phase in PHASES:
                values = [r[phase] for r in runs]
                row[phase] = {
                    "p50_ms": round(percentile(values, 0.5), 1),
                    "p95_ms": round(percentile(values, 0.95), 1),
                    "max_ms": round(max(values), 1),
                }
            rows.append(row)
    return rows


def group_of(module: str) -> str:
    """The bucket an imported module's time is counted in: its package, memento's by subpackage."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "memento" else parts[0]


def import_split(embedder: str, top: int) -> dict[str, Any]:
    """`python -X importtime` of a stdio serve that stops at once: the total, the top groups
    (self time summed per package) and every module imported (for the regression test)."""
    with tempfile.TemporaryDirectory(prefix="memento-imports-") as tmp:
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "memento", "serve", "--transport", "stdio"],
            env=server_env(Path(tmp) / "m.db", embedder),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
    groups: dict[str, int] = defaultdict(int)
    modules = []
    for line in done.stderr.splitlines():
        match = IMPORT_LINE.match(line)
        if match:
            groups[group_of(match.group(4))] += int(match.group(1))
            modules.append(match.group(4))
    total = sum(groups.values())
    ranked = sorted(groups.items(), key=lambda kv: -kv[1])[:top]
    return {
        "total_ms": round(total / 1e3, 1),
        "modules": len(modules),
        "top": [{"group": g, "self_ms": round(us / 1e3, 1)} for g, us in ranked],
        "imported": sorted(set(modules)),
    }


def model_cost() -> dict[str, float]:
    """The local model in a fresh process: import, engine load, first and second query embedding."""
    done = subprocess.run([sys.executable, "-c", MODEL_PROBE], capture_output=True, text=True, timeout=300, check=True)
    return {k: round(v, 1) for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}


def print_report(report: dict[str, Any]) -> None:
    print(f"stdio start-up, {report['embedder']} embedder, {report['repeats']} starts each (ms from spawn)")
    print(f"{'command':18s} {'mode':7s} " + " ".join(f"{p + ' p50/p95/max':>26s}" for p in PHASES))
    for row in report["starts"]:
        cells = " ".join(f"{row[p]['p50_ms']:>8.0f} /{row[p]['p95_ms']:>7.0f} /{row[p]['max_ms']:>7.0f}" for p in PHASES)
        print(f"{row['command']:18s} {row['mode']:7s} {cells}")
    imports = report.get("imports")
    if imports:
        print(f"imports of a stdio serve: {imports['total_ms']} ms self time over {imports['modules']} modules; top groups:")
        for item in imports["top"]:
            print(f"  {item['group']:32s} {item['self_ms']:8.1f} ms")
    model = report.get("model")
    if model:
        print("local model in a fresh process: " + ", ".join(f"{k.removesuffix('_ms').replace('_', ' ')} {v} ms" for k, v in model.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--modes", default="auto,legacy", help="client connect modes, comma-separated (auto probes server/discover)")
    parser.add_argument("--embedder", choices=("local", "hash"), default="local")
    parser.add_argument("--top", type=int, default=15, help="import groups to print")
    parser.add_argument("--no-split", action="store_true", help="skip the import-time and model split")
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if args.repeats < 1 or not modes or set(modes) - {"auto", "legacy"}:
        parser.error("--repeats must be positive and --modes a list of auto, legacy")
    report: dict[str, Any] = {"embedder": args.embedder, "repeats": args.repeats, "starts": measure(args.repeats, modes, args.embedder)}
    if not args.no_split:
        report["imports"] = import_split(args.embedder, args.top)
        if args.embedder == "local":
            report["model"] = model_cost()
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
