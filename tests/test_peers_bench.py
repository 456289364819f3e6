"""bench/peers.py at a tiny size: Memento's side always, each peer only where scripts/peers installed it.

Latencies are printed by the bench, never asserted here; the test checks that the harness drives
each server through MCP stdio, fills and measures it, counts non-empty answers and reports ratios.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import peers  # type: ignore[import-not-found]  # noqa: E402
from locomo_data import ENV  # type: ignore[import-not-found]  # noqa: E402

# The benches' LoCoMo split lives outside the repository; these runs use a small conversation in
# its format, written for the tests, so they pass wherever the clone is.
TINY = ROOT / "tests" / "data" / "locomo_tiny.json"

pytestmark = pytest.mark.slow
FIGURES = {"p50_ms", "p95_ms", "p99_ms", "mean_ms", "samples", "ratio_p50"}


def run_bench(tmp_path: Path, servers: str, sizes: str = "20", samples: int = 5) -> tuple[dict[str, Any], str]:
    out = tmp_path / "peers.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]), ENV: str(TINY)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "peers.py"), "--sizes", sizes, "--samples", str(samples), "--servers", servers]
        + ["--workdir", str(tmp_path / "stores"), "--json", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    return json.loads(out.read_text()), done.stdout


def check_server(entry: dict[str, Any], variants: set[str], samples: int) -> None:
    assert set(entry["write"]) >= FIGURES and entry["write"]["samples"] == samples
    assert set(entry["search"]) == variants
    for figures in entry["search"].values():
        assert FIGURES | {"answered", "mean_hits", "calls_per_search", "connect_ms"} <= set(figures)
        assert figures["samples"] == samples and 0 <= figures["answered"] <= samples
        assert figures["p50_ms"] <= figures["p95_ms"] <= figures["p99_ms"]


def test_memento_side_fills_measures_and_reports(tmp_path: Path) -> None:
    report, stdout = run_bench(tmp_path, "memento-hash", sizes="20,30")
    assert report["sizes"] == [20, 30] and report["samples"] == 5 and report["reference"] == "memento-hash"
    assert "memento-hash" in report["servers"] and report["skipped"] == {}
    for size in ("20", "30"):
        entry = report["results"][size]["memento-hash"]
        check_server(entry, {"recall"}, 5)
        assert entry["write"]["ratio_p50"] == 1.0 and entry["search"]["recall"]["ratio_p50"] == 1.0
        assert entry["search"]["recall"]["answered"] == 5  # every LoCoMo question finds something
        assert entry["fill"]["added"] == (20 if size == "20" else 10)  # the second size continues the first fill
    # The stores stay in --workdir: Memento's holds the fills and the measured writes.
    state = json.loads((tmp_path / "stores" / "memento-hash" / "state.json").read_text())
    assert state == {"filled": 30, "written": 20, "stored": 30}
    assert "## 20 memories" in stdout and "## 30 memories" in stdout and "| memento-hash | search recall |" in stdout


def test_a_missing_peer_is_skipped_with_the_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peers, "MMS_BIN", tmp_path / "nowhere" / "memory")
    assert "scripts/peers --install-only" in (peers.mms_available() or "")
    monkeypatch.setattr(peers, "SERVER_MEMORY_JS", tmp_path / "nowhere" / "index.js")
    assert "scripts/peers --install-only" in (peers.sm_available() or "")


def test_the_corpus_is_distinct_texts_and_the_questions_loCoMo_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peers, "DEFAULT_DATA", TINY)
    tiny = json.loads(TINY.read_text())
    turns = [
        f"{t['speaker']}: {t['text']}"
        for k, v in tiny[0]["conversation"].items()
        if k.startswith("session_") and isinstance(v, list)
        for t in v
    ]
    texts = peers.corpus(3500)  # the conversation's turns run out long before 3,500: distractors follow
    assert len(texts) == len(set(texts)) == 3500 and texts[: len(turns)] == turns
    assert peers.questions() == [qa["question"] for qa in tiny[0]["qa"]]
    monkeypatch.setattr(peers, "DEFAULT_DATA", ROOT / "nowhere.json")
    with pytest.raises(SystemExit, match=ENV):  # a missing split says how to name it
        peers.questions()


@pytest.mark.skipif(peers.sm_available() is not None, reason=f"server-memory not installed: {peers.sm_available()}")
def test_server_memory_beside_memento(tmp_path: Path) -> None:
    report, stdout = run_bench(tmp_path, "memento-hash,server-memory")
    entry = report["results"]["20"]["server-memory"]
    check_server(entry, {"keywords", "question"}, 5)
    assert entry["search"]["keywords"]["calls_per_search"] > 1  # one search_nodes per keyword
    assert entry["search"]["question"]["answered"] <= entry["search"]["keywords"]["answered"]
    assert (tmp_path / "stores" / "server-memory" / "memory.jsonl").stat().st_size > 0  # its file, 25 entities
    assert "@modelcontextprotocol/server-memory" in report["servers"]["server-memory"]


@pytest.mark.skipif(
    peers.mms_available() is not None or not os.environ.get("MEMENTO_PEERS_MMS"),
    reason="mcp-memory-service is installed by scripts/peers --install-only and run with MEMENTO_PEERS_MMS=1 (loads torch, ~1 min)",
)
def test_mcp_memory_service_beside_memento(tmp_path: Path) -> None:
    report, _ = run_bench(tmp_path, "memento-hash,mcp-memory-service")
    entry = report["results"]["20"]["mcp-memory-service"]
    check_server(entry, {"semantic", "hybrid"}, 5)
    assert entry["search"]["semantic"]["answered"] == 5
    assert "hash embeddings" not in (tmp_path / "stores" / "mcp-memory-service" / "server.log").read_text()


def test_memento_bulk_fill_is_the_remember_call_in_process(tmp_path: Path) -> None:
    out = tmp_path / "peers.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]), ENV: str(TINY)}
    args = ["--sizes", "20", "--samples", "3", "--servers", "memento-hash", "--workdir", str(tmp_path / "s"), "--bulk-fill"]
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "peers.py"), *args, "--json", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    entry = json.loads(out.read_text())["results"]["20"]["memento-hash"]
    assert entry["fill"]["bulk"] is True and entry["fill"]["added"] == 20 and entry["stored"] == 20
    assert entry["search"]["recall"]["answered"] == 3  # the server finds what the bulk path stored
