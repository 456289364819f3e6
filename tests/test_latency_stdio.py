"""A tiny run of bench/latency_stdio.py (bench/latency.py --background-load): it runs, prints, writes its JSON.

Latencies are printed by the bench, never asserted here (the machine is shared).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from latency_stdio import busy_processes, variant_env  # type: ignore[import-not-found]  # noqa: E402
from locomo_data import ENV  # type: ignore[import-not-found]  # noqa: E402

TINY = ROOT / "tests" / "data" / "locomo_tiny.json"  # a small conversation in LoCoMo's format (the split is outside the repository)


def test_variants_name_the_threads_and_the_wait_policy() -> None:
    assert variant_env("auto") == {"MEMENTO_EMBED_THREADS": "auto"}
    assert variant_env("2-active") == {"MEMENTO_EMBED_THREADS": "2", "OMP_WAIT_POLICY": "active"}
    assert variant_env("2-spin300000") == {"MEMENTO_EMBED_THREADS": "2", "GOMP_SPINCOUNT": "300000", "OMP_WAIT_POLICY": ""}
    with pytest.raises(SystemExit, match="unknown variant"):
        variant_env("2-sometimes")


def test_busy_processes_run_while_the_block_runs_and_end_with_it() -> None:
    with busy_processes(2) as procs:
        assert len(procs) == 2 and all(p.poll() is None for p in procs)
    assert all(p.poll() is not None for p in procs)


def latency_py(*args: str, script: str = "latency.py") -> str:
    """bench/`script` run with `args`; its standard output (a failed run fails the test)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        cwd=ROOT,
        env={**os.environ, "LOG_LEVEL": "WARNING", ENV: str(TINY)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_a_tiny_run_through_latency_py(tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    stdout = latency_py(
        *["--background-load", "1", "--size", "30", "--samples", "3", "--model-samples", "3", "--variants", "auto"],
        *["--json", str(out), "--embed-cache", str(tmp_path / "cache")],
    )
    report = json.loads(out.read_text())
    rows = report["rows"]
    assert [(r["variant"], r["busy"]) for r in rows] == [("auto", 0), ("auto", 1)]  # the quiet baseline comes first
    assert rows[0]["remember_ratio"] == rows[0]["recall_ratio"] == 1.0
    for row in rows:
        assert row["remember_p50"] > 0 and row["recall_p99"] >= row["recall_p50"] > 0
        assert set(row["model_threads"]) <= {1.0, float(os.cpu_count() or 1)}  # auto: one thread, or every core under load
    assert "| auto | 1 |" in stdout and "the model alone" in stdout


@pytest.mark.slow
def test_a_tiny_sustained_run_through_latency_py(tmp_path: Path) -> None:
    """`--sustained S`: recalls back to back for S seconds after the usual figures, with and
    without the server's heap settling."""
    for extra in ([], ["--no-settle"]):
        stdout = latency_py("--sizes", "300", "--samples", "5", "--skip-model", "--db", str(tmp_path / "s.db"), "--sustained", "1", *extra)
        line = next(x for x in stdout.splitlines() if "sustained recall store" in x)
        recalls = int(line.split(": ", 1)[1].split(" recalls", 1)[0].replace(",", ""))
        assert recalls > 1 and "p99" in line and "over 3x p50" in line


@pytest.mark.slow
def test_a_tiny_run_of_every_recall_path(tmp_path: Path) -> None:
    """bench/recall_paths.py on a store bench/latency.py filled: one row per path, and memory_stats."""
    db = tmp_path / "paths.db"
    latency_py("--sizes", "300", "--samples", "5", "--skip-model", "--db", str(db))
    stdout = latency_py("--db", str(db), "--samples", "4", "--stats", "1", script="recall_paths.py")
    rows = [line for line in stdout.splitlines() if line.startswith("| ") and not line.startswith(("| path", "| ---"))]
    assert len(rows) == 22 and any(r.startswith("| recall + topic |") for r in rows) and rows[-2].startswith("| memory_stats")
    assert rows[-1].startswith("| delete a memory")
    assert "305 memories" in stdout
