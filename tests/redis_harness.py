"""A throw-away redis-server for the tests that need one.

`redis_server` (function scope) starts `redis-server --port <free> --bind 127.0.0.1 --save ""
--appendonly no` as a subprocess, waits for PING, and stops it afterwards; `stop()` and
`start()` let a test kill it mid-run and bring it back on the same port. Without a
redis-server binary the tests are skipped, unless MEMENTO_REQUIRE_REDIS=1 (CI), which makes
that a failure.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest

START_TIMEOUT_S = 10.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    def __init__(self, binary: str, port: int) -> None:
        self.binary = binary
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        import redis

        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        try:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
                try:
                    if client.ping():
                        return
                except redis.RedisError:
                    pass
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"redis-server did not answer PING within {START_TIMEOUT_S:g}s")
                time.sleep(0.05)
        finally:
            client.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None


def _unavailable(reason: str) -> None:
    if os.environ.get("MEMENTO_REQUIRE_REDIS") == "1":
        pytest.fail(f"{reason} (MEMENTO_REQUIRE_REDIS=1)")
    pytest.skip(reason)


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    binary = shutil.which("redis-server")
    if binary is None:
        _unavailable("redis-server not installed")
    try:
        import redis  # noqa: F401
    except ImportError:
        _unavailable("the redis package is not installed (pip install -e .[test])")
    server = RedisServer(str(binary), _free_port())
    try:
        server.start()
    except RuntimeError as exc:
        _unavailable(str(exc))
    yield server
    server.stop()
