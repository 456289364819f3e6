"""Summaries for scripts/conformance: read what each run left behind and count checks.

Two kinds of run:

- suite:  `@modelcontextprotocol/conformance server ... -o DIR` writes one folder per scenario
          (`server-<scenario>-<timestamp>/checks.json`; `authorization ...` runs write
          `authorization-server-<scenario>-<timestamp>/`, a list of checks whose status is SUCCESS,
          FAILURE, WARNING, INFO or SKIPPED) and prints a `=== SUMMARY ===` block.
- client: tests/node/sdk_client.mjs prints one JSON object: {"checks": [{name, ok, detail}], ...}.

Each `suite` / `client` call appends one record to a JSON-lines file and prints a short
report; `final` prints the table of all records, writes summary.json beside the JSON-lines
file and exits 1 when any run has a failure. Standard library only, so any Python runs it;
tests/test_conformance.py imports it for the same parsing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

_SCENARIO_DIR = re.compile(r"^(?:authorization-)?server-(?P<name>.+?)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
_SUMMARY_LINE = re.compile(r"^[^\w\s]?\s*(?P<name>[\w./:-]+): (?P<passed>\d+) passed, (?P<failed>\d+) failed")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _short(text: Any, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _log_summary(log: Path) -> dict[str, tuple[int, int]]:
    """Per-scenario (passed, failed) from the runner's own SUMMARY block, if it printed one."""
    if not log.is_file():
        return {}
    text = _ANSI.sub("", log.read_text(encoding="utf-8", errors="replace"))
    if "=== SUMMARY ===" not in text:
        return {}
    counts: dict[str, tuple[int, int]] = {}
    for line in text.split("=== SUMMARY ===", 1)[1].splitlines():
        m = _SUMMARY_LINE.match(line.strip())
        if m and m["name"] != "Total":
            counts[m["name"]] = (int(m["passed"]), int(m["failed"]))
    return counts


def parse_suite(name: str, results: Path, log: Path, exit_code: int) -> dict[str, Any]:
    """Count the checks of one conformance-suite run."""
    passed = failed = warnings = 0
    failures: list[dict[str, str]] = []
    warned: list[dict[str, str]] = []
    scenarios: dict[str, dict[str, int]] = {}
    for checks_file in sorted(results.glob("*/checks.json")) if results.is_dir() else []:
        m = _SCENARIO_DIR.match(checks_file.parent.name)
        scenario = m["name"] if m else checks_file.parent.name
        try:
            checks = json.loads(checks_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            checks = [{"id": "checks.json", "status": "FAILURE", "errorMessage": f"unreadable: {exc}"}]
        counts = scenarios.setdefault(scenario, {"passed": 0, "failed": 0, "warnings": 0})
        for check in checks:
            status = str(check.get("status", "")).upper()
            item = {
                "scenario": scenario,
                "check": str(check.get("id") or check.get("name") or "?"),
                "message": _short(check.get("errorMessage") or check.get("description") or ""),
            }
            if status == "SUCCESS":
                passed += 1
                counts["passed"] += 1
            elif status == "FAILURE":
                failed += 1
                counts["failed"] += 1
                failures.append(item)
            elif status == "WARNING":
                warnings += 1
                counts["warnings"] += 1
                warned.append(item)
    # A scenario the runner reports as failing but that left no checks.json (it crashed).
    for scenario, (_, n_failed) in _log_summary(log).items():
        if n_failed and scenario not in scenarios:
            failed += n_failed
            failures.append({"scenario": scenario, "check": scenario, "message": "failed without a checks.json (see the log)"})
    if exit_code != 0 and failed == 0:
        failed += 1
        failures.append({"scenario": "(runner)", "check": "exit-code", "message": f"runner exited {exit_code} (see the log)"})
    return {
        "name": name,
        "kind": "suite",
        "passed": passed,
        "failed": failed,
        "warnings": warnings,
        "exit_code": exit_code,
        "failures": failures,
        "warned": warned,
        "scenarios": scenarios,
        "log": str(log),
        "results": str(results),
    }


def parse_client(name: str, output: Path, exit_code: int) -> dict[str, Any]:
    """Count the checks of one Node SDK client run (the last JSON line it printed)."""
    report: dict[str, Any] = {}
    text = output.read_text(encoding="utf-8", errors="replace") if output.is_file() else ""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                report = json.loads(line)
                break
            except ValueError:
                continue
    checks = report.get("checks") or []
    failures = [{"scenario": name, "check": str(c.get("name")), "message": _short(c.get("detail", ""))} for c in checks if not c.get("ok")]
    passed = sum(1 for c in checks if c.get("ok"))
    if not report:
        failures.append({"scenario": name, "check": "output", "message": f"no JSON report (exit {exit_code})"})
    elif report.get("fatal"):
        failures.append({"scenario": name, "check": "fatal", "message": _short(report["fatal"])})
    if exit_code != 0 and not failures:
        failures.append({"scenario": name, "check": "exit-code", "message": f"client exited {exit_code}"})
    return {
        "name": name,
        "kind": "client",
        "passed": passed,
        "failed": len(failures),
        "warnings": 0,
        "exit_code": exit_code,
        "failures": failures,
        "warned": [],
        "negotiated": report.get("negotiated"),
        "expected": report.get("expected"),
        "sdk": report.get("sdk"),
        "transport": report.get("transport"),
        "log": str(output),
    }


def print_record(record: dict[str, Any], out: Any = sys.stdout) -> None:
    mark = "PASS" if record["failed"] == 0 else "FAIL"
    extra = f", {record['warnings']} warning(s)" if record.get("warnings") else ""
    print(f"[{mark}] {record['kind']} {record['name']}: {record['passed']} passed, {record['failed']} failed{extra}", file=out)
    for f in record["failures"]:
        print(f"    x {f['scenario']} / {f['check']}: {f['message']}", file=out)
    for w in record.get("warned", []):
        print(f"    ! {w['scenario']} / {w['check']}: {w['message']}", file=out)


def load_records(jsonl: Path) -> list[dict[str, Any]]:
    if not jsonl.is_file():
        return []
    return [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines() if line.strip()]


def final(jsonl: Path) -> int:
    records = load_records(jsonl)
    passed = sum(r["passed"] for r in records)
    failed = sum(r["failed"] for r in records)
    summary = {"passed": passed, "failed": failed, "runs": records}
    (jsonl.parent / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print("\n=== conformance summary ===")
    width = max((len(r["name"]) for r in records), default=10)
    for r in records:
        mark = "PASS" if r["failed"] == 0 else "FAIL"
        print(f"  {mark}  {r['kind']:<6} {r['name']:<{width}}  {r['passed']:>4} passed  {r['failed']:>4} failed")
    print(f"details: {jsonl.parent / 'summary.json'}")
    # The plain closing line CI readers understand.
    print(f"conformance: {passed} passed, {failed} failed")
    return 1 if failed or not records else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("suite")
    s.add_argument("name")
    s.add_argument("results", type=Path)
    s.add_argument("log", type=Path)
    s.add_argument("exit_code", type=int)
    s.add_argument("--jsonl", type=Path, required=True)
    c = sub.add_parser("client")
    c.add_argument("name")
    c.add_argument("output", type=Path)
    c.add_argument("exit_code", type=int)
    c.add_argument("--jsonl", type=Path, required=True)
    f = sub.add_parser("final")
    f.add_argument("jsonl", type=Path)
    args = p.parse_args(argv)
    if args.cmd == "final":
        return final(args.jsonl)
    if args.cmd == "suite":
        record = parse_suite(args.name, args.results, args.log, args.exit_code)
    else:
        record = parse_client(args.name, args.output, args.exit_code)
    with args.jsonl.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
    print_record(record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
