"""A SQLite store filled through the service, closed (which gathers the planner's statistics, as
in use: PRAGMA optimize) and opened again: for tests that read SQLite's plans or depend on them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memento.app import App, build_app
from memento.embeddings.protocol import Embedder
from memento.models import CallContext, RememberInput
from memento.settings import Settings


@contextmanager
def reopened_store(path: Path, embedder: Embedder, memories: Iterator[RememberInput], agent: str = "alice") -> Iterator[App]:
    """An app on a SQLite store at `path` that holds `memories` (remembered as `agent`, settled)."""
    settings = Settings(DATABASE_URL=f"sqlite:///{path}", EMBEDDING_PROVIDER="hash", MEMENTO_SQLITE_SYNCHRONOUS="OFF")
    ctx = CallContext(agent_id=agent)
    built = build_app(settings, embedder=embedder)
    try:
        for memory in memories:
            built.service.remember(memory, ctx)
        assert built.service.settle(120)
    finally:
        built.close()
    app = build_app(settings, embedder=embedder)
    try:
        yield app
    finally:
        app.close()
