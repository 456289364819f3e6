"""Shared fixtures: a real database per test (SQLite file, or PostgreSQL) and the hash embedder.

A test module marked `pytest.mark.backends("sqlite", "postgres")` runs every test that uses
`settings`/`app`/`service` once per backend; unmarked modules run on SQLite only. The
PostgreSQL server is started once per session by tests/pg_harness.py, and only when a test
needs it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pg_harness import PostgresServer, postgres_server  # noqa: F401  (fixture)

from memento.app import App, build_app
from memento.embeddings.hashing import HashEmbedder
from memento.models import CallContext
from memento.service import MemoryService
from memento.settings import Settings


class Clock:
    """A settable clock so lifecycle tests need no sleeping."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("backends")
    if marker is not None and "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", marker.args)


@pytest.fixture
def backend() -> str:
    """The storage backend under test; parametrised by the `backends` marker."""
    return "sqlite"


@pytest.fixture
def settings(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> Settings:
    if backend == "postgres":
        server: PostgresServer = request.getfixturevalue("postgres_server")
        server.reset()
        return Settings(DATABASE_URL=server.app_dsn, DATABASE_MIGRATION_URL=server.owner_dsn, EMBEDDING_PROVIDER="hash")
    return Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'memento.db'}", EMBEDDING_PROVIDER="hash")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def app(settings: Settings, clock: Clock) -> Iterator[App]:
    built = build_app(settings, embedder=HashEmbedder(256), clock=clock)
    yield built
    built.close()


@pytest.fixture
def service(app: App) -> MemoryService:
    return app.service


@pytest.fixture
def ctx() -> CallContext:
    return CallContext(session_id="session-1")
