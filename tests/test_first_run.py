"""A quiet, informative first run: text logs on a terminal and JSON lines elsewhere, one start-up
line naming the database, the model and the transport, "serving on" only once the port is
bound (a port in use is reported as such), and a wheel build without license warnings."""

from __future__ import annotations

import json
import logging
import os
import pty
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp_helpers import SERVE, TIMEOUT_S, server_env
from pydantic import ValidationError
from terminal_helpers import on_terminal

from memento import __version__
from memento.ops.logs import configure_logging
from memento.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (INFO|WARNING|ERROR|DEBUG) [\w.]+: ")


@pytest.fixture
def restore_root_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    uvicorn_level = logging.getLogger("uvicorn.error").level
    try:
        yield
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        root.setLevel(level)
        logging.getLogger("uvicorn.error").setLevel(uvicorn_level)


def logged_through(log_format: str, terminal: bool, tmp_path: Path) -> list[str]:
    """Configure logging onto a terminal or a pipe, log one line with a secret, return what came out."""
    read_fd, write_fd = pty.openpty() if terminal else os.pipe()
    with os.fdopen(write_fd, "w", encoding="utf-8") as stream:
        configure_logging(Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'm.db'}", MEMENTO_LOG_FORMAT=log_format), stream=stream)
        logging.getLogger("memento.test").info("connecting with password=hunter2-secret to the store")
        stream.flush()
        shown = os.read(read_fd, 65536).decode("utf-8")
    os.close(read_fd)
    return [line for line in shown.replace("\r\n", "\n").splitlines() if line]


@pytest.mark.parametrize(
    ("log_format", "terminal", "text"), [("auto", True, True), ("auto", False, False), ("json", True, False), ("text", False, True)]
)
def test_stderr_logs_are_text_on_a_terminal_and_json_lines_otherwise(
    log_format: str, terminal: bool, text: bool, tmp_path: Path, restore_root_logging: None
) -> None:
    (line,) = logged_through(log_format, terminal, tmp_path)
    assert "hunter2-secret" not in line and "[REDACTED]" in line  # redacted in either format
    if text:
        assert TEXT_LINE.match(line), line
        assert line.endswith("INFO memento.test: connecting with password=[REDACTED] to the store")
    else:
        entry = json.loads(line)
        assert entry["level"] == "INFO" and entry["logger"] == "memento.test"


def test_the_log_format_setting_takes_both_names_and_refuses_others() -> None:
    assert Settings(MEMENTO_LOG_FORMAT="text").log_format == "text"
    assert Settings(LOG_FORMAT="json").log_format == "json"
    assert Settings().log_format == "auto"
    with pytest.raises(ValidationError):
        Settings(MEMENTO_LOG_FORMAT="yaml")


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def index_of(entries: list[dict[str, Any]], start: str) -> int:
    return next(i for i, e in enumerate(entries) if e["msg"].startswith(start))


@pytest.mark.slow
def test_the_http_server_names_its_database_model_and_port_once_bound(tmp_path: Path) -> None:
    db = tmp_path / "new" / "memento.db"
    log = tmp_path / "stderr.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*SERVE, "--transport", "http", "--port", "0"], env={**os.environ, **server_env(db)}, stdin=subprocess.DEVNULL, stderr=sink
        )
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while "serving MCP on" not in log.read_text():
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)  # readiness poll of a separate process; there is no event to await
        entries = json_lines(log.read_text())
        created = entries[index_of(entries, "created database")]
        assert str(db) in created["msg"] and "0001_initial" in created["msg"]  # one line for the whole schema
        start = entries[index_of(entries, f"memento {__version__} starting")]
        assert (start["backend"], start["database"], start["embedding_model"], start["transport"]) == (
            "sqlite",
            str(db.resolve()),
            "hash:v1:256",
            "http",
        )
        serving = entries[index_of(entries, "serving MCP on http://127.0.0.1:")]
        assert entries.index(start) < entries.index(serving) and serving["port"] > 0
        assert httpx.get(f"http://127.0.0.1:{serving['port']}/health", timeout=TIMEOUT_S).status_code == 200
        assert not [e for e in entries if e["logger"].startswith("uvicorn")]  # its start-up notes are ours now
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=TIMEOUT_S) in (0, -signal.SIGTERM)


@pytest.mark.slow
def test_a_port_in_use_is_reported_and_nothing_claims_to_serve(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = subprocess.run(
            [*SERVE, "--transport", "http", "--port", str(port)],
            env={**os.environ, **server_env(tmp_path / "m.db")},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S * 4,
        )
    assert done.returncode != 0
    assert f"cannot serve on 127.0.0.1:{port}: address already in use" in done.stderr
    assert "serving MCP on" not in done.stderr and "Uvicorn running" not in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_stdio_start_up_is_text_on_a_terminal(tmp_path: Path) -> None:
    env = server_env(tmp_path / "m.db")
    shown = on_terminal([*SERVE, "--transport", "stdio"], env, stderr=True)  # stdin at EOF: the session ends at once
    lines = [line for line in shown.terminal.replace("\r\n", "\n").splitlines() if line.strip()]
    starting = next(i for i, line in enumerate(lines) if f"memento {__version__} starting" in line)
    assert TEXT_LINE.match(lines[starting]) and "INFO memento.app:" in lines[starting]
    assert f"sqlite database {(tmp_path / 'm.db').resolve()}" in lines[starting] and "transport stdio" in lines[starting]
    assert any(line.endswith("serving MCP on stdio") for line in lines[starting + 1 :])
    assert not any(line.startswith("{") for line in lines)
    piped = on_terminal([*SERVE, "--transport", "stdio"], env)
    assert json_lines(piped.stderr)[0]["msg"].startswith(f"memento {__version__} starting")


@pytest.mark.slow
def test_the_wheel_builds_without_license_warnings(tmp_path: Path) -> None:
    """The package metadata declares its license the current way (SPDX `license` and
    `license-files`): setuptools has nothing to warn about."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--verbose", "--wheel-dir", str(tmp_path / "dist"), str(tree)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    output = built.stdout + built.stderr
    assert "adding license file" in output  # the verbose build output is really here
    complaints = [line for line in output.splitlines() if re.search(r"(?i)(warn|deprecat).*licen[cs]e|licen[cs]e.*(warn|deprecat)", line)]
    assert complaints == []
    assert len(list((tmp_path / "dist").glob("memento_server-*.whl"))) == 1
