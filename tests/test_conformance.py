"""MCP conformance: the official conformance suites and real Node SDK clients, via scripts/conformance.

The script owns the toolchain (Node 22 and pinned npm packages in .tools/), the server it tests
and the runs; these tests drive it once per kind of run (`--only clients`, `--only suites`) and
assert that every run it reports came out with zero failed checks. Without an installed toolchain
they skip, unless MEMENTO_REQUIRE_CONFORMANCE=1 makes that a failure (as CI should).

The parser tests at the end need no toolchain and always run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from runtime_env import runtime_venv

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "conformance"
RUN_TIMEOUT_S = 1500

CLIENT_RUNS = [
    "sdk-1.0.4/stdio",
    "sdk-1.0.4/sse",
    "sdk-1.11.0/streamable-http",
    "sdk-1.13.0/streamable-http",
    "sdk-current/streamable-http",
]
SUITE_RUNS = [
    "0.1.16",
    "0.2.0-alpha.12/2025-11-25",
    "0.2.0-alpha.12/2025-06-18",
    "0.2.0-alpha.12/2025-03-26",
    "0.2.0-alpha.12/2026-07-28",
    *(
        f"0.2.0-alpha.12/2026-07-28/{scenario}"  # the tasks extension's scenarios, one run each (not the always-skipped status one)
        for scenario in (
            "tasks-lifecycle",
            "tasks-capability-negotiation",
            "tasks-wire-fields",
            "tasks-request-state-removal",
            "tasks-mrtr-input",
            "tasks-request-headers",
            "tasks-dispatch-and-envelope",
            "tasks-required-task-error",
            "tasks-mrtr-composition",
        )
    ),
    "0.2.0-alpha.12/authorization/2025-11-25",
    "0.2.0-alpha.12/authorization/2025-06-18",
    "0.2.0-alpha.12/authorization/2025-03-26",
    "0.2.0-alpha.12/authorization/2026-07-28",
]


def _load_report() -> ModuleType:
    path = ROOT / "scripts" / "conformance_report.py"
    spec = importlib.util.spec_from_file_location("conformance_report", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


report = _load_report()


@pytest.fixture(scope="session")
def toolchain() -> None:
    """Skip (or fail, when required) unless scripts/conformance has installed its toolchain."""
    check = subprocess.run(["bash", str(SCRIPT), "--check"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    if check.returncode == 0:
        return
    message = (check.stdout + check.stderr).strip() or f"scripts/conformance --check exited {check.returncode}"
    if os.environ.get("MEMENTO_REQUIRE_CONFORMANCE") == "1":
        pytest.fail(f"MEMENTO_REQUIRE_CONFORMANCE=1 but the toolchain is missing: {message}")
    pytest.skip(f"conformance toolchain not installed (scripts/conformance --install-only): {message}")


class _Runs:
    """Runs scripts/conformance once per kind and keeps its records by run name."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.results: dict[str, dict[str, dict[str, Any]]] = {}

    def get(self, kind: str) -> dict[str, dict[str, Any]]:
        if kind not in self.results:
            out = self.base / kind
            proc = subprocess.run(
                ["bash", str(SCRIPT), "--no-install", "--only", kind, "--out", str(out)],
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT_S,
                cwd=ROOT,
                # The servers run from the runtime-only environment (tests/runtime_env.py).
                env={**os.environ, "PYTHON": sys.executable, "MEMENTO_VENV": str(runtime_venv())},
            )
            (out / "script.log").parent.mkdir(parents=True, exist_ok=True)
            (out / "script.log").write_text(proc.stdout + proc.stderr, encoding="utf-8")
            summary = out / "summary.json"
            assert summary.is_file(), (
                f"scripts/conformance --only {kind} wrote no summary (exit {proc.returncode}):\n" + (proc.stdout + proc.stderr)[-4000:]
            )
            runs = json.loads(summary.read_text(encoding="utf-8"))["runs"]
            self.results[kind] = {r["name"]: r for r in runs}
        return self.results[kind]


@pytest.fixture(scope="session")
def runs(toolchain: None, tmp_path_factory: pytest.TempPathFactory) -> _Runs:
    return _Runs(tmp_path_factory.mktemp("conformance"))


def _explain(record: dict[str, Any]) -> str:
    lines = [f"{record['kind']} {record['name']}: {record['passed']} passed, {record['failed']} failed"]
    lines += [f"  {f['scenario']} / {f['check']}: {f['message']}" for f in record["failures"]]
    lines.append(f"raw output: {record.get('log')}")
    return "\n".join(lines)


@pytest.mark.conformance
@pytest.mark.parametrize("name", CLIENT_RUNS)
def test_node_sdk_client(runs: _Runs, name: str) -> None:
    """A real SDK client negotiates its own protocol version and stores and recalls a memory."""
    record = runs.get("clients").get(name)
    assert record is not None, f"scripts/conformance did not run client {name}"
    assert record["failed"] == 0, _explain(record)
    assert record["negotiated"] == record["expected"], _explain(record)


@pytest.mark.conformance
@pytest.mark.parametrize("name", SUITE_RUNS)
def test_conformance_suite(runs: _Runs, name: str) -> None:
    """The official conformance suite passes with zero failed checks."""
    record = runs.get("suites").get(name)
    assert record is not None, f"scripts/conformance did not run suite {name}"
    assert record["passed"] > 0, _explain(record)
    assert record["failed"] == 0, _explain(record)


@pytest.mark.conformance
@pytest.mark.parametrize("kind, expected", [("clients", CLIENT_RUNS), ("suites", SUITE_RUNS)])
def test_script_runs_exactly_these(runs: _Runs, kind: str, expected: list[str]) -> None:
    """The parametrised names above stay in step with what the script runs."""
    assert sorted(runs.get(kind)) == sorted(expected)


# ---------------------------------------------------------------- the parser (no toolchain)


def _write_checks(results: Path, scenario: str, checks: list[dict[str, Any]]) -> None:
    folder = results / f"server-{scenario}-2026-01-01T00-00-00-000Z"
    folder.mkdir(parents=True)
    (folder / "checks.json").write_text(json.dumps(checks), encoding="utf-8")


def test_parse_suite_counts_checks_and_crashed_scenarios(tmp_path: Path) -> None:
    results = tmp_path / "out"
    _write_checks(results, "server-initialize", [{"id": "init", "status": "SUCCESS"}, {"id": "x", "status": "INFO"}])
    _write_checks(results, "tools-list", [{"id": "tools-list", "status": "FAILURE", "errorMessage": "Method\n not found"}])
    _write_checks(results, "ping", [{"id": "ping", "status": "WARNING", "errorMessage": "slow"}])
    log = tmp_path / "run.log"
    log.write_text(
        "noise\n=== SUMMARY ===\n\u2713 server-initialize: 1 passed, 0 failed\n"
        "\u2717 tools-list: 0 passed, 1 failed\n\u2717 resources-list: 0 passed, 2 failed\n"
        "\nTotal: 1 passed, 3 failed\n",
        encoding="utf-8",
    )
    record = report.parse_suite("demo", results, log, 1)
    assert (record["passed"], record["failed"], record["warnings"]) == (1, 3, 1)
    assert {(f["scenario"], f["check"]) for f in record["failures"]} == {("tools-list", "tools-list"), ("resources-list", "resources-list")}
    assert record["failures"][0]["message"] == "Method not found"


def test_parse_suite_counts_a_failed_runner_with_no_checks(tmp_path: Path) -> None:
    record = report.parse_suite("demo", tmp_path / "missing", tmp_path / "missing.log", 2)
    assert record["failed"] == 1 and record["failures"][0]["check"] == "exit-code"


def test_parse_client(tmp_path: Path) -> None:
    output = tmp_path / "client.json"
    output.write_text(
        json.dumps(
            {
                "checks": [{"name": "connect", "ok": True}, {"name": "recall", "ok": False, "detail": "probe missing"}],
                "expected": "2025-03-26",
                "negotiated": "2025-03-26",
            }
        )
        + "\n",
        encoding="utf-8",
    )
    record = report.parse_client("c", output, 1)
    assert (record["passed"], record["failed"]) == (1, 1)
    assert record["failures"] == [{"scenario": "c", "check": "recall", "message": "probe missing"}]
    empty = report.parse_client("c", tmp_path / "nothing.json", 2)
    assert empty["failed"] == 1 and empty["failures"][0]["check"] == "output"
