"""A short run of the load test (bench/load.py): a few clients, a few seconds, SQLite, 0 errors.

Latency and memory are printed by the bench, never asserted here (the machine is shared).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOLS = {"remember", "recall", "context", "amend", "link", "forget", "memory_stats"}


@pytest.mark.slow
def test_concurrent_clients_with_mixed_tools_see_no_errors(tmp_path: Path) -> None:
    summary_file = tmp_path / "load.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "load.py"),
            "--setup",
            "sqlite",
            "--clients",
            "3",
            "--seconds",
            "4",
            "--json",
            str(summary_file),
        ],
        cwd=ROOT,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(summary_file.read_text())
    assert summary["errors"] == 0 and summary["first_errors"] == []
    assert summary["calls"] > 0
    assert {tool for tool, figures in summary["tools"].items() if figures["calls"]} == TOOLS  # every tool was called
    assert [m["server"] for m in summary["memory"]] == ["sqlite"] and summary["memory"][0]["end_mib"] > 0
    assert "error rate" in done.stdout and "p99" in done.stdout and "memory" in done.stdout


def bench_rows(script: str, *args: str) -> list[list[str]]:
    """Run bench/SCRIPT with ARGS; the cells of the table rows it printed (header apart)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args], cwd=ROOT, env=os.environ.copy(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return [[c.strip() for c in line.split("|")[1:-1]] for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line][
        1:
    ]


@pytest.mark.slow
def test_the_call_cost_bench_prints_a_row_per_call_it_timed() -> None:
    rows = bench_rows("call_cost.py", "--tools", "tools/list,recall,remember", "--calls", "5", "--memories", "3")
    assert [r[0] for r in rows] == ["tools/list", "recall", "remember"]
    for _, calls, cpu, wall in rows:
        assert int(calls) == 5 and float(cpu) >= 0 and float(wall) > 0


@pytest.mark.slow
def test_the_write_stream_bench_prints_remember_and_recall_rows() -> None:
    rows = bench_rows("write_stream.py", "--embedder", "hash", "--seconds", "2", "--warm", "5", "--settle-s", "0.2")
    assert [r[0] for r in rows] == ["remember", "recall"]
    for _, calls, p50, p95, p99 in rows:
        assert int(calls) > 0 and 0 < float(p50) <= float(p95) <= float(p99)
