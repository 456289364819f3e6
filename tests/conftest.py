"""Shared fixtures: a real database per test (SQLite file, or PostgreSQL) and the hash embedder.

A test module (or function) marked `pytest.mark.backends("sqlite", "postgres")` runs every test
that uses `settings`/`app`/`service`/`store_env`/`module_store_env` once per backend; unmarked
ones run on SQLite only. The backends:

* `sqlite`: a fresh SQLite file in the test's temporary directory;
* `postgres`: the session's PostgreSQL (tests/pg_harness.py), its tables emptied first;
* `postgres+redis`: the same, with REDIS_ENABLED against the session's redis-server (emptied
  first) — the scale-out deployment the MCP suites run on.

The servers are started once per session, and only when a test needs them. The parameter is
module-scoped so a module-scoped server process can depend on it; tests are grouped by backend.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pg_harness import PostgresServer, postgres_server  # noqa: F401  (fixture)
from redis_harness import RedisServer, _free_port, _unavailable

from memento.app import App, build_app
from memento.embeddings.hashing import HashEmbedder
from memento.models import CallContext
from memento.service import MemoryService
from memento.settings import Settings

# The suite shares a loaded machine: give the embedding worker room before a recall (and a
# write-time decision) stops waiting for it. A wait ends as soon as the worker is done, so a healthy
# run is not slowed; tests/test_embedding_outbox.py sets the production bounds where they matter.
os.environ.setdefault("MEMENTO_EMBED_SETTLE_MS", "10000")
os.environ.setdefault("MEMENTO_EMBED_WRITE_WAIT_MS", "5000")


class Clock:
    """A settable clock so lifecycle tests need no sleeping."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


BACKENDS = ("sqlite", "postgres", "postgres+redis")

# A server a test starts (`memento serve` inherits this environment) consolidates by itself only
# when the test asks (tests/test_scheduler.py): a run a few seconds after start, or after the
# 50th memory, would add runs and events the other end-to-end tests do not expect.
for _name in ("MEMENTO_CONSOLIDATE_ON_START", "MEMENTO_CONSOLIDATE_INTERVAL_MINUTES", "MEMENTO_CONSOLIDATE_EVERY_INSERTS"):
    os.environ.setdefault(_name, "false" if _name.endswith("ON_START") else "0")
StoreEnv = Callable[[Path], dict[str, str]]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("backends")
    if "module_store_env" in metafunc.fixturenames:
        module = metafunc.definition.getparent(pytest.Module)
        assert module is not None and module.get_closest_marker("backends"), "module_store_env needs a module-wide `backends` marker"
    if marker is not None and "backend" in metafunc.fixturenames:
        unknown = set(marker.args) - set(BACKENDS)
        assert not unknown, f"unknown backends {unknown}; known: {BACKENDS}"
        metafunc.parametrize("backend", marker.args, scope="module")


@pytest.fixture(scope="module")
def backend() -> str:
    """The storage backend under test; parametrised by the `backends` marker."""
    return "sqlite"


@pytest.fixture(scope="session")
def shared_redis() -> Iterator[RedisServer]:
    """One redis-server for the session's `postgres+redis` runs (emptied before each use)."""
    binary = shutil.which("redis-server")
    if binary is None:
        _unavailable("redis-server not installed")
    server = RedisServer(str(binary), _free_port())
    try:
        server.start()
    except (RuntimeError, ImportError) as exc:  # ImportError: the redis package is missing
        _unavailable(str(exc))
    yield server
    server.stop()


def _store_env(backend: str, request: pytest.FixtureRequest) -> StoreEnv:
    if backend == "sqlite":
        return lambda folder: {"DATABASE_URL": f"sqlite:///{folder / 'memento.db'}"}
    postgres: PostgresServer = request.getfixturevalue("postgres_server")
    redis: RedisServer | None = request.getfixturevalue("shared_redis") if backend == "postgres+redis" else None

    def fresh(folder: Path) -> dict[str, str]:
        postgres.reset()
        env = {"DATABASE_URL": postgres.app_dsn, "DATABASE_MIGRATION_URL": postgres.owner_dsn}
        if redis is not None:
            _flush(redis)
            env.update(REDIS_ENABLED="true", REDIS_HOST="127.0.0.1", REDIS_PORT=str(redis.port))
        return env

    return fresh


@pytest.fixture
def store_env(backend: str, request: pytest.FixtureRequest) -> StoreEnv:
    """`store_env(folder)`: the settings (environment variable names) of an empty store on
    `backend` — a new SQLite file in `folder`, or the emptied PostgreSQL (and Redis)."""
    return _store_env(backend, request)


@pytest.fixture(scope="module")
def module_store_env(backend: str, request: pytest.FixtureRequest) -> StoreEnv:
    """`store_env` for a module-scoped server. Its module must carry the `backends` marker as a
    whole: a module-scoped value would outlive a switch between marked and unmarked tests."""
    return _store_env(backend, request)


def _flush(server: RedisServer) -> None:
    import redis

    with redis.Redis(port=server.port) as client:
        client.flushall()


@pytest.fixture
def settings(tmp_path: Path, store_env: StoreEnv, backend: str) -> Settings:
    configured = Settings(**store_env(tmp_path), EMBEDDING_PROVIDER="hash")  # type: ignore[arg-type]
    assert (configured.backend, configured.redis_enabled) == (backend.split("+")[0], backend.endswith("+redis"))
    return configured


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def app(settings: Settings, clock: Clock) -> Iterator[App]:
    built = build_app(settings, embedder=HashEmbedder(256), clock=clock)
    if built.keyword_index is not None:  # L1 in use from the first call: the same results every run
        assert built.keyword_index.wait_ready()
    yield built
    built.close()


@pytest.fixture
def service(app: App) -> MemoryService:
    return app.service


@pytest.fixture
def ctx() -> CallContext:
    return CallContext(session_id="session-1")
