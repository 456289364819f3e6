"""Stdio start-up stays light: what `serve --transport stdio` imports, the background warm-up,
and a tiny run of bench/startup.py (its figures are printed by the bench, never asserted here)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memento.app import build_app, start_warm_up
from memento.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
# -X importtime keeps its running totals in process-wide counters: a module imported while the
# warm-up thread imports others can print a negative self time, so a sign is allowed.
IMPORTED = re.compile(r"^import time:\s+-?\d+ \|\s+-?\d+ \|\s*(\S+)\s*$", re.MULTILINE)

# Modules a stdio server has no use for at start-up, each costing tens of milliseconds (or
# more) to import: the web face, the HTTP clients of the OpenAI embedder and the language
# models, the optional backends. A new top-level import of one of them fails here.
NOT_ON_STDIO = (
    "fastapi",
    "starlette",
    "uvicorn",
    "httpx",
    "psycopg",
    "redis",
    "yaml",
    "memento.web",
    "memento.rest",
    "memento.embeddings.openai",
    "memento.llm.chat",
    "memento.llm.gemini",
    "memento.cli.export",
)


def _env(store: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "EMBEDDING_", "REDIS_"))}
    return {**clean, "DATABASE_URL": f"sqlite:///{store}", "EMBEDDING_PROVIDER": "hash", "LOG_LEVEL": "WARNING"}


@pytest.mark.slow
def test_stdio_serve_does_not_import_the_web_stack_or_unused_clients(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "memento", "serve", "--transport", "stdio"],
        env=_env(tmp_path / "m.db"),
        stdin=subprocess.DEVNULL,  # EOF at once: the server starts, serves nothing, stops
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    imported = set(IMPORTED.findall(done.stderr))
    assert "memento.mcp.stdio" in imported and "memento.app" in imported  # the serving path was measured
    loaded = sorted(m for m in imported if any(m == lazy or m.startswith(lazy + ".") for lazy in NOT_ON_STDIO))
    assert loaded == []


def test_the_lazy_names_still_resolve() -> None:
    from memento.embeddings import OpenAICompatibleEmbedder
    from memento.llm import ChatCompletions, GeminiGenerate

    assert [c.__name__ for c in (OpenAICompatibleEmbedder, ChatCompletions, GeminiGenerate)] == [
        "OpenAICompatibleEmbedder",
        "ChatCompletions",
        "GeminiGenerate",
    ]
    with pytest.raises(AttributeError):
        import memento.embeddings as embeddings

        _ = embeddings.NoSuchEmbedder


def test_warm_up_loads_the_token_encoding_in_the_background(tmp_path: Path) -> None:
    app = build_app(Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'm.db'}", EMBEDDING_PROVIDER="hash"))
    try:
        tokens = app.service.factory.tokens
        assert tokens._encode is None  # build_app no longer pays for it
        thread = start_warm_up(app)
        thread.join(timeout=60)
        assert not thread.is_alive()
        assert tokens._encode is not None and tokens.count("hello world") == 2
    finally:
        app.close()


@pytest.mark.slow
def test_startup_bench_runs_and_reports_every_phase(tmp_path: Path) -> None:
    out = tmp_path / "startup.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "startup.py"),
            "--repeats",
            "1",
            "--modes",
            "legacy",
            "--embedder",
            "hash",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["embedder"] == "hash" and report["repeats"] == 1
    assert {row["command"] for row in report["starts"]} >= {"python -m memento"}
    for row in report["starts"]:
        assert row["mode"] == "legacy"
        connect, recall, remember = (row[p]["p50_ms"] for p in ("connect", "recall", "remember"))
        assert 0 < connect <= recall <= remember  # the phases are cumulative, from the spawn
    assert report["imports"]["modules"] > 0 and report["imports"]["top"]
    assert "memento.web" not in report["imports"]["imported"]
    assert "connect p50/p95/max" in done.stdout and "imports of a stdio serve" in done.stdout


def test_settling_moves_start_up_objects_out_of_the_collections_and_leaves_new_ones_in() -> None:
    # In a child process: freezing the test runner's own heap would outlive this test.
    script = (
        "import gc\n"
        "from memento.ops.heap import settle\n"
        "old = [[] for _ in range(1000)]\n"
        "frozen = settle()\n"
        "assert frozen == gc.get_freeze_count() > 1000, frozen\n"
        "walked = {id(o) for o in gc.get_objects()}\n"
        "assert not {id(o) for o in old} & walked  # no longer walked by any collection\n"
        "new = [[] for _ in range(10)]\n"
        "assert {id(o) for o in new} <= {id(o) for o in gc.get_objects()}  # later objects are collected as before\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


@pytest.mark.slow
def test_a_stdio_server_settles_its_heap_once_warm(tmp_path: Path) -> None:
    """`memento serve` freezes what start-up made (ops/heap.py) after the warm-up, while it serves."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "memento", "serve", "--transport", "stdio"],
        env={**_env(tmp_path / "m.db"), "LOG_LEVEL": "DEBUG"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    settled = threading.Event()
    lines: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "heap settled" in line:
                settled.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert proc.stdin is not None and proc.stdout is not None
        hello = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        }
        proc.stdin.write(json.dumps(hello) + "\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["result"]["serverInfo"]["name"]
        assert settled.wait(60), "".join(lines)[-3000:]
        frozen = int(re.search(r"heap settled: (\d+) objects frozen", "".join(lines)).group(1))  # type: ignore[union-attr]
        assert frozen > 10_000  # the modules, classes and functions of a started server
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=60)
        reader.join(timeout=10)
    assert proc.returncode == 0, "".join(lines)[-3000:]


@pytest.mark.slow
def test_an_http_server_settles_its_heap_before_serving_and_once_warm(tmp_path: Path) -> None:
    """Over HTTP the web stack's objects are frozen too, before the first request is served."""
    from mcp_helpers import server_env, start_http_server

    server = start_http_server({**server_env(tmp_path / "m.db"), "LOG_LEVEL": "DEBUG"}, tmp_path / "server.log")
    try:
        assert "heap settled" in server.log.read_text()  # before /health first answered
        deadline = time.monotonic() + 60
        while server.log.read_text().count("heap settled") < 2:  # and again once the warm-up ended
            assert time.monotonic() < deadline, server.log.read_text()[-3000:]
            time.sleep(0.05)  # a separate process's log: there is no event to await
    finally:
        server.stop()
