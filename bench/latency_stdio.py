"""remember and recall through MCP stdio, on a quiet machine and beside N busy processes.

What an agent host on a busy laptop sees: `memento serve --transport stdio` started as a child
process by the official `mcp` client, with the default local model, timed from the client's
call to its answer. The store holds `--size` memories of one agent (bench/recall_stdio.py's
fill: LoCoMo dev's turns, then PyPI summaries, all embedded by the local model).

For each load level N (`--background-load 0,2,4,8`; 0 is the quiet baseline) N busy processes
(a Python loop each, `nice` 0 like the server) run beside the server while it answers: first
`--samples` `remember` calls (new texts), then, once the embedding outbox has had time to
drain, `--samples` `recall` calls (LoCoMo questions), each call `--gap-ms` after the previous
answer (an agent thinks between calls). Each variant of the embedding threads
(`--variants auto,2`) gets its own server per level: `auto` or a number is MEMENTO_EMBED_THREADS
(`2` on this 2-core machine is the behaviour before issue 19: every call on every core);
`-active` adds OMP_WAIT_POLICY=active, `-spinN` GOMP_SPINCOUNT=N with the policy unset (libgomp's
own default is 300000 spins; Memento sets passive). Beside each level it also times the model
alone in a child process with the variant's environment (query and passage embedding, one text
per call; `--model-samples 0` skips it).

    python bench/latency.py --background-load 0,2,4,8 [--variants auto,1,2] [--samples 100]
    python bench/latency_stdio.py --background-load 0,4 [--size 1000] [--gap-ms 20] [--json out.json]
                                  [--autogroup-nice -10]

The busy processes each run in their own session, like the stdio server (the `mcp` client
starts it so): where Linux groups scheduling by session (autogroup, on by default on desktops),
each then weighs what the server weighs, as every process does elsewhere. On a shared machine,
`--autogroup-nice -10` (root) raises the server's, the probe's and the busy processes' groups
together, so the other work weighs little and the figures approach a quiet machine's.

Prints p50/p95/p99 per call, per variant and level, the load average seen during the level,
and each p50 as a multiple of the variant's quiet p50 (issue 19's target: <= 2x).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from distractors import distractor_texts
from embed_cache import DEFAULT_DIR
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from recall_stdio import AGENT, fill

BUSY = "while True:\n    pass\n"


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


AUTOGROUP = Path("/proc/self/autogroup")


def set_autogroup_nice(pid: int, nice: int | None) -> None:
    """Linux with autogroup scheduling: give `pid`'s session group this nice value (root only)."""
    if nice is None:
        return
    try:
        Path(f"/proc/{pid}/autogroup").write_text(str(nice))
    except OSError as exc:
        raise SystemExit(f"--autogroup-nice needs Linux autogroup scheduling and the right to raise priority: {exc}") from exc


def server_pids() -> list[int]:
    """This process's child `memento serve` processes."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == os.getpid() and b"memento" in cmdline and b"serve" in cmdline:
            found.append(int(entry.name))
    return found


@contextmanager
def busy_processes(n: int, nice: int | None = None) -> Iterator[list[subprocess.Popen[bytes]]]:
    """N processes that each keep one core busy until the block ends.

    Each is its own session, as the stdio server is (the `mcp` client starts it so): where the
    kernel groups scheduling by session (autogroup), each busy process weighs what the server
    weighs, as every process does where it does not."""
    procs = [subprocess.Popen([sys.executable, "-c", BUSY], start_new_session=True) for _ in range(n)]
    for p in procs:
        set_autogroup_nice(p.pid, nice)
    try:
        time.sleep(1.0 if n else 0.0)  # let the scheduler see them
        yield procs
    finally:
        for p in procs:
            p.send_signal(signal.SIGKILL)
        for p in procs:
            p.wait()


def variant_env(variant: str) -> dict[str, str]:
    """`auto` or a thread count, then optionally `-passive`, `-active` or `-spinN` (GOMP_SPINCOUNT=N)."""
    threads, _, policy = variant.partition("-")
    env = {"MEMENTO_EMBED_THREADS": threads}
    if policy.startswith("spin") and policy[4:].isdigit():
        env["GOMP_SPINCOUNT"] = policy[4:]
        env["OMP_WAIT_POLICY"] = ""  # set but empty: Memento keeps it, libgomp falls back to its own policy
    elif policy in ("passive", "active"):
        env["OMP_WAIT_POLICY"] = policy
    elif policy:
        raise SystemExit(f"unknown variant {variant!r}: the part after '-' is passive, active or spinN")
    return env


def probe(samples: int) -> dict[str, list[float]]:
    """Run in a child process with a variant's environment: the model alone, in-process."""
    from memento.embeddings.local import LocalE5Embedder
    from memento.settings import Settings

    model = LocalE5Embedder(threads=Settings().embed_threads)
    model.warm_up()
    texts = distractor_texts(2 * samples)
    times: dict[str, list[float]] = {"query": [], "passage": [], "threads": []}
    for i in range(samples):
        t = time.perf_counter()
        model.embed_query(texts[i])
        times["query"].append((time.perf_counter() - t) * 1000)
        times["threads"].append(float(model.threads.last))
        t = time.perf_counter()
        model.embed_passages([texts[samples + i]])
        times["passage"].append((time.perf_counter() - t) * 1000)
        time.sleep(0.01)
    return times


def probe_in_child(variant: str, samples: int, nice: int | None = None) -> dict[str, list[float]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    env.update(variant_env(variant))
    out = subprocess.run(
        [sys.executable, __file__, "--probe", str(samples)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent,
        start_new_session=True,
        preexec_fn=None if nice is None else (lambda: AUTOGROUP.write_text(str(nice))),
    )
    return json.loads(out.stdout)


def server_env(path: Path, variant: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    env.update(
        {
            "DATABASE_URL": f"sqlite:///{path}",
            "EMBEDDING_PROVIDER": "local",
            "MEMENTO_EVALUATOR_ENABLED": "false",
            "MEMENTO_CONSOLIDATE_ON_START": "false",
            "MEMENTO_CONSOLIDATE_INTERVAL_MINUTES": "0",
            "MEMENTO_CONSOLIDATE_EVERY_INSERTS": "0",
        }
    )
    env.update(variant_env(variant))
    return env


async def measure(
    path: Path, variant: str, questions: list[str], texts: list[str], samples: int, gap: float, nice: int | None = None
) -> dict[str, list[float]]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memento", "serve", "--transport", "stdio"], env=server_env(path, variant)
    )
    out: dict[str, list[float]] = {"remember": [], "recall": []}

    async def call(tool: str, args: dict[str, object]) -> float:
        t = time.perf_counter()
        result = await client.call_tool(tool, {**args, "agentId": AGENT})
        took = (time.perf_counter() - t) * 1000
        if result.is_error:
            raise RuntimeError(f"{tool} failed: {result.content}")
        return took

    async with Client(params, read_timeout_seconds=120) as client:
        for pid in server_pids():
            set_autogroup_nice(pid, nice)
        for q in questions[:5]:  # warm: the model loads, the vector index is read
            await call("recall", {"text": q, "limit": 10})
        for text in texts[:3]:
            await call("remember", {"content": text, "topic": "load", "type": "fact"})
        await asyncio.sleep(1.0)
        for text in texts[3 : 3 + samples]:
            out["remember"].append(await call("remember", {"content": text, "topic": "load", "type": "fact"}))
            await asyncio.sleep(gap)
        await asyncio.sleep(2.0)  # the outbox embeds what was just written
        for q in questions[5 : 5 + samples]:
            out["recall"].append(await call("recall", {"text": q, "limit": 10}))
            await asyncio.sleep(gap)
    return out


def run(args: argparse.Namespace) -> dict[str, object]:
    levels = [int(n) for n in str(args.background_load).split(",") if n.strip()]
    if 0 not in levels:
        levels.insert(0, 0)  # the quiet baseline every ratio is against
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    results: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "load.db"
        t0 = time.perf_counter()
        questions = fill(path, args.size, args.embed_cache)
        print(f"store: {args.size} memories of one agent in {time.perf_counter() - t0:.0f}s", file=sys.stderr)
        texts = [f"(load note {i}) {t}" for i, t in enumerate(distractor_texts(args.size + 20 * args.samples)[args.size :])]
        print(
            f"remember and recall through MCP stdio (official client), {args.size} memories, {args.samples} calls each, "
            f"{args.gap_ms:g} ms between calls, {os.cpu_count()} cores; N busy processes beside the server"
        )
        print(
            "| variant | N busy | load avg | remember p50 / p95 / p99 ms | recall p50 / p95 / p99 ms | remember p50 ×quiet | recall p50 ×quiet |"
        )
        print("|---|---|---|---|---|---|---|")
        quiet: dict[str, dict[str, float]] = {}
        model_rows: list[str] = []
        offset = 0
        for variant in variants:
            for n in levels:
                chunk = texts[offset : offset + args.samples + 3]
                offset += args.samples + 3
                with busy_processes(n, args.autogroup_nice):
                    times = asyncio.run(measure(path, variant, questions, chunk, args.samples, args.gap_ms / 1000, args.autogroup_nice))
                    load = os.getloadavg()[0]
                    alone = probe_in_child(variant, args.model_samples, args.autogroup_nice) if args.model_samples else None
                p50 = {k: pct(v, 50) for k, v in times.items()}
                if n == 0:
                    quiet[variant] = p50
                base = quiet.get(variant, p50)
                row = {
                    "variant": variant,
                    "busy": n,
                    "load": round(load, 1),
                    **{f"{k}_p{p}": round(pct(v, p), 2) for k, v in times.items() for p in (50, 95, 99)},
                    **{f"{k}_ratio": round(p50[k] / base[k], 2) for k in times},
                }
                if alone:
                    row.update({f"model_{k}_p{p}": round(pct(v, p), 2) for k, v in alone.items() if k != "threads" for p in (50, 95)})
                    row["model_threads"] = sorted(set(alone["threads"]))
                    model_rows.append(
                        f"| {variant} | {n} | "
                        + " | ".join(f"{pct(alone[k], 50):.1f} / {pct(alone[k], 95):.1f}" for k in ("query", "passage"))
                        + f" | {', '.join(str(int(t)) for t in sorted(set(alone['threads'])))} |"
                    )
                results.append(row)
                print(
                    f"| {variant} | {n} | {load:.1f} | "
                    + " | ".join(
                        f"{pct(times[k], 50):.1f} / {pct(times[k], 95):.1f} / {pct(times[k], 99):.1f}" for k in ("remember", "recall")
                    )
                    + f" | {row['remember_ratio']:.2f} | {row['recall_ratio']:.2f} |",
                    flush=True,
                )
    if model_rows:
        print("\nthe model alone (in-process, one text per call, same busy processes):")
        print("| variant | N busy | query p50 / p95 ms | passage p50 / p95 ms | threads used |")
        print("|---|---|---|---|---|")
        print("\n".join(model_rows))
    return {"size": args.size, "samples": args.samples, "gap_ms": args.gap_ms, "cores": os.cpu_count(), "rows": results}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--size", type=int, default=1000, help="memories in the agent's store")
    parser.add_argument("--samples", type=int, default=100, help="remember and recall calls per variant and level")
    parser.add_argument("--gap-ms", type=float, default=20.0, help="pause after each answer, as an agent thinks")
    parser.add_argument("--variants", default="auto", help="embedding threads: auto or a number, then -passive, -active or -spinN")
    parser.add_argument("--embed-cache", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--autogroup-nice",
        type=int,
        help="Linux autogroup, root: this nice for the server's, the model probe's and each busy process's session group "
        "(e.g. -10, so other work on a shared machine weighs little)",
    )
    parser.add_argument("--model-samples", type=int, default=40, help="also time the model alone per variant and level (0: skip)")


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--probe":
        print(json.dumps(probe(int(sys.argv[2]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--background-load", default="0,4", help="busy processes beside the server, a list (0 = quiet)")
    add_arguments(parser)
    args = parser.parse_args()
    report = run(args)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
