"""Shared fixtures: a real SQLite file per test and the deterministic hash embedder."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

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


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
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
