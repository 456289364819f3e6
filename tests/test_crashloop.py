"""The crash loop (bench/crashloop.py), short: a writer SIGKILLed at random moments loses no
acknowledged write and leaves no multi-step write half-done, on both backends. The long run
(`python bench/crashloop.py --backend sqlite|postgres --kills 1000`) is in docs/benchmarks.md."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from pg_harness import PostgresServer

from memento.app import build_app
from memento.embeddings.hashing import HashEmbedder
from memento.settings import Settings

pytestmark = pytest.mark.slow

KILLS = 20


def crashloop() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "bench" / "crashloop.py"
    spec = importlib.util.spec_from_file_location("crashloop", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["crashloop"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def assert_survived(figures: dict[str, object]) -> None:
    assert figures["kills"] == KILLS
    assert figures["lost"] == [] and figures["half_done"] == [] and figures["integrity"] == []
    acknowledged = figures["acknowledged"]
    assert isinstance(acknowledged, dict)
    for op in ("remember", "amend", "supersede", "link", "forget", "reflect"):
        assert acknowledged.get(op, 0) >= 5, f"too few acknowledged {op} writes to mean anything: {acknowledged}"


def test_no_acknowledged_write_is_lost_and_none_is_half_done_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    assert_survived(crashloop().run(url, url, KILLS, 11, 1, tmp_path, progress=False))


def test_no_acknowledged_write_is_lost_and_none_is_half_done_on_postgres(tmp_path: Path, postgres_server: PostgresServer) -> None:
    module = crashloop()
    postgres_server.reset()
    settings = Settings(DATABASE_URL=postgres_server.app_dsn, DATABASE_MIGRATION_URL=postgres_server.owner_dsn, EMBEDDING_PROVIDER="hash")
    build_app(settings, embedder=HashEmbedder(module.WRITER_DIMENSIONS)).close()
    assert_survived(module.run(postgres_server.app_dsn, postgres_server.owner_dsn, KILLS, 12, 1, tmp_path, progress=False))
