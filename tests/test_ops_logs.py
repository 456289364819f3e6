"""Structured logs: JSON lines, rotation under LOG_DIR, and redaction of secrets, PII and content.

The end-to-end test plants an access key, an e-mail address, a Korean password label and a
unique memory content string through real tool calls against a real server process with
LOG_DIR set, then reads every log file (and stderr): none of them may appear.
"""

from __future__ import annotations

import io
import json
import logging
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_helpers import SERVE, TIMEOUT_S, data, server_env, start_http_server

from memento.ops.logs import JsonFormatter, RedactionFilter, add_secret, configure_logging, redact
from memento.settings import Settings

ACCESS_KEY = "opskey-Zq8Xw3Vt9Lm2Pn7Rb4Hc6"
EMAIL = "jinho.secret.person@example.org"
PASSWORD_VALUE = "hunter2-비밀"
CONTENT_MARKER = "zebracorn-quasar-7741"


@pytest.fixture
def restore_root_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    access = logging.getLogger("uvicorn.access")
    access_handlers, access_propagate = list(access.handlers), access.propagate
    try:
        yield
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        root.setLevel(level)
        access.handlers, access.propagate = access_handlers, access_propagate


@pytest.mark.parametrize(
    ("text", "leak"),
    [
        ("GET /sse?accessKey=abcdef123456&x=1", "abcdef123456"),
        ("Authorization: Bearer abc.def-ghi_123456", "abc.def-ghi_123456"),
        ('{"access_token": "tok-998877", "x": 1}', "tok-998877"),
        ("contact jinho.secret.person@example.org now", "jinho.secret.person@example.org"),
        ("비밀번호: hunter2 please", "hunter2"),
        ("password=letmein123", "letmein123"),
        ("postgresql://memento:pg-pass-77@db:5432/memento", "pg-pass-77"),
        ("key sk-abcdefghijklmnopqrstuvwxyz0123456789", "sk-abcdefghijklmnopqrstuvwxyz0123456789"),
        ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "eyJzdWIiOiIxIn0"),
        (
            "1 validation error\ncontent\n  Input should be a valid string [type=string_type, input_value='private words', input_type=str]",
            "private words",
        ),
        ("call 010-1234-5678", "010-1234-5678"),
    ],
)
def test_redact_masks_secrets_and_pii(text: str, leak: str) -> None:
    assert leak not in redact(text)


def test_configured_secret_values_are_redacted_anywhere() -> None:
    add_secret("custom-secret-value-42")
    assert redact("oops custom-secret-value-42 printed") == "oops [REDACTED] printed"
    assert redact("ordinary words stay") == "ordinary words stay"


def test_filter_redacts_arguments_and_exceptions() -> None:
    record = logging.LogRecord(
        "memento.x", logging.ERROR, __file__, 1, "user %s said %s", ("a@b.example.com", "Bearer qwertyuiop123"), None
    )
    try:
        raise ValueError("token=zzz-leaked-zzz")
    except ValueError:
        record.exc_info = sys.exc_info()
    assert RedactionFilter().filter(record)
    line = JsonFormatter().format(record)
    entry = json.loads(line)
    assert "a@b.example.com" not in line and "qwertyuiop123" not in line and "zzz-leaked-zzz" not in line
    assert entry["level"] == "ERROR" and entry["logger"] == "memento.x" and "ValueError" in entry["exc"]


def test_json_lines_on_stderr_and_rotation_under_log_dir(tmp_path: Path, restore_root_logging: None) -> None:
    settings = Settings(
        DATABASE_URL=f"sqlite:///{tmp_path / 'm.db'}", LOG_DIR=str(tmp_path / "logs"), LOG_MAX_BYTES=2048, LOG_BACKUP_COUNT=2
    )
    stream = io.StringIO()
    configure_logging(settings, stream=stream)
    configure_logging(settings, stream=stream)  # idempotent: no duplicated handlers
    log = logging.getLogger("memento.test")
    for i in range(200):
        log.info("line %d of the rotation test", i, extra={"tool": "remember", "outcome": "ok"})
    lines = stream.getvalue().splitlines()
    assert len(lines) == 200
    entry = json.loads(lines[-1])
    assert entry["msg"] == "line 199 of the rotation test" and entry["tool"] == "remember" and entry["outcome"] == "ok"
    files = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert files == ["memento.log", "memento.log.1", "memento.log.2"]  # rotated, two backups kept
    for path in (tmp_path / "logs").iterdir():
        assert path.stat().st_size <= 2048 + 512
        for line in path.read_text(encoding="utf-8").splitlines():
            json.loads(line)


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_no_secret_reaches_any_log(tmp_path: Path, anyio_backend: str) -> None:
    log_dir = tmp_path / "logs"
    env = {**server_env(tmp_path / "m.db"), "LOG_DIR": str(log_dir), "LOG_LEVEL": "DEBUG", "MEMENTO_ACCESS_KEY": ACCESS_KEY}
    server = start_http_server(env, tmp_path / "stderr.log")
    secret_content = f"Project {CONTENT_MARKER} owner is {EMAIL}, 비밀번호: {PASSWORD_VALUE}"
    try:
        auth = {"Authorization": f"Bearer {ACCESS_KEY}"}
        async with httpx2.AsyncClient(headers=auth, timeout=TIMEOUT_S) as http2:
            async with Client(streamable_http_client(server.mcp, http_client=http2), read_timeout_seconds=TIMEOUT_S) as client:
                stored = data(
                    await client.call_tool(
                        "remember",
                        {"content": secret_content, "topic": f"topic-{CONTENT_MARKER}", "type": "fact", "keywords": [CONTENT_MARKER]},
                    )
                )
                found = data(await client.call_tool("recall", {"text": f"who owns {CONTENT_MARKER}?"}))
                assert found["fragments"][0]["id"] == stored["id"]
                assert CONTENT_MARKER in found["fragments"][0]["content"]  # stored (redacted of PII only)
                # Failing calls echo nothing either: a validation error, an unknown id, a bad tool.
                bad = await client.call_tool(
                    "remember", {"content": secret_content, "topic": "t", "type": "fact", "importance": f"{CONTENT_MARKER}"}
                )
                assert bad.is_error is True
                missing = await client.call_tool("amend", {"id": f"frag-{CONTENT_MARKER}", "content": secret_content})
                assert missing.is_error is True
                await client.call_tool("memory_stats", {})
        async with httpx.AsyncClient(timeout=TIMEOUT_S) as http:
            # A credential in the query string and a wrong bearer token are refused and logged.
            await http.get(server.url + f"/sse?accessKey={ACCESS_KEY}&note={CONTENT_MARKER}")
            await http.post(server.mcp, headers={"Authorization": f"Bearer wrong-{ACCESS_KEY}"}, json={})
            assert (await http.get(server.url + "/health")).status_code == 200
    finally:
        assert server.stop() in (0, -signal.SIGTERM)
    files = [*log_dir.iterdir(), server.log]
    assert any(p.name == "memento.log" for p in files)
    text = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in files)
    assert "tool call remember: ok" in text  # the tool calls were logged, by name and outcome
    for secret in (ACCESS_KEY, EMAIL, PASSWORD_VALUE, CONTENT_MARKER, "zebracorn"):
        assert secret not in text, f"{secret!r} leaked into the logs"
    for line in (log_dir / "memento.log").read_text(encoding="utf-8").splitlines():
        json.loads(line)


def test_cli_configures_json_logging(tmp_path: Path) -> None:
    """`memento stats` logs through the same set-up (JSON lines on stderr)."""
    env = {**server_env(tmp_path / "m.db"), "LOG_DIR": str(tmp_path / "logs")}
    done = subprocess.run([SERVE[0], "-m", "memento", "stats"], env={**__import__("os").environ, **env}, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "logs" / "memento.log").read_text(encoding="utf-8").splitlines()
    assert lines and all(json.loads(line)["level"] for line in lines)
