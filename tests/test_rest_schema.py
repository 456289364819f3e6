"""Schemathesis against the served `/api/openapi.json` (and seed 003's `/v1/openapi.json`) with a valid agent key: generated requests
(valid and invalid) for every route; no answer may be a server error (5xx), and every answer must
match the document — its status codes, content types and response schemas (problem documents
included). The event stream is left out (it never ends)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_helpers import HttpServer, server_env, start_http_server
from rest_helpers import KEY_A, rest_env

pytestmark = [pytest.mark.slow]

CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"
RUN_TIMEOUT_S = 600


@pytest.fixture
def server(tmp_path: Path) -> Iterator[HttpServer]:
    running = start_http_server({**server_env(tmp_path / "memento.db"), **rest_env()}, tmp_path / "server.log")
    try:
        yield running
    finally:
        running.stop()


@pytest.mark.parametrize("api", ["/api", "/v1"])
def test_the_api_keeps_to_its_openapi_document(server: HttpServer, tmp_path: Path, api: str) -> None:
    with server.log.open("rb") as log:
        log.seek(0, 2)
        command = [
            str(Path(sys.executable).with_name("schemathesis")),
            "run",
            server.url + api + "/openapi.json",
            "--header",
            f"Authorization: Bearer {KEY_A}",
            "--checks",
            CHECKS,
            "--exclude-path",
            "/events",
            "--max-examples",
            "25",
            "--seed",
            "1",
            "--phases",
            "examples,coverage,fuzzing",
            "--generation-database",
            "none",
            "--request-timeout",
            "30",
            "--workers",
            "1",  # hypothesis describes filters by parsing source; Python 3.11's parser is not thread-safe
            "--no-color",
        ]
        run = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=tmp_path)
        server_log = log.read().decode(errors="replace")
    report = run.stdout + run.stderr
    assert run.returncode == 0, report[-20_000:] + "\n--- server log ---\n" + server_log[-5_000:]
    assert "Traceback" not in server_log, server_log[-10_000:]
