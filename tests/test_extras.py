"""A missing optional dependency or database extension stops Memento with a message that says what
to install or run, never a traceback from deep inside a backend."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp_helpers import SERVE

from memento.errors import Unavailable

pytestmark = pytest.mark.slow


def run_without(modules: list[str], args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`python -m memento ARGS` in the runtime environment with `modules` made unimportable, as if
    the extra that provides them had not been installed."""
    hide = "; ".join(f"sys.modules[{m!r}] = None" for m in modules)
    code = f"import sys; {hide}; from memento.cli import main; sys.exit(main())"
    return subprocess.run(
        [SERVE[0], "-c", code, *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("args", [["serve", "--transport", "stdio"], ["serve", "--transport", "http", "--port", "0"]])
def test_a_postgres_url_without_the_postgres_extra_names_the_extra(tmp_path: Path, args: list[str]) -> None:
    done = run_without(
        ["psycopg", "psycopg_pool", "pgvector"],
        args,
        {"DATABASE_URL": "postgresql://memento@127.0.0.1:1/memento", "EMBEDDING_PROVIDER": "hash"},
    )
    assert done.returncode != 0
    assert "needs the optional 'postgres' dependencies" in done.stderr and "[postgres]'" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "ModuleNotFoundError" not in done.stderr


def test_redis_enabled_without_the_redis_extra_names_the_extra(tmp_path: Path) -> None:
    done = run_without(
        ["redis"],
        ["serve", "--transport", "stdio"],
        {"DATABASE_URL": f"sqlite:///{tmp_path / 'm.db'}", "REDIS_ENABLED": "true", "EMBEDDING_PROVIDER": "hash"},
    )
    assert done.returncode != 0
    assert "REDIS_ENABLED=true needs the optional 'redis' dependencies" in done.stderr and "[redis]'" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_migrate_to_postgres_without_the_extra_names_the_extra(tmp_path: Path) -> None:
    done = run_without(["psycopg"], ["migrate", "--from", f"sqlite:///{tmp_path / 'm.db'}", "--to", "postgresql://u@127.0.0.1:1/db"], {})
    assert done.returncode != 0
    assert "[postgres]'" in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.backends("postgres")
def test_a_database_without_pgvector_is_prepared_or_the_operator_gets_the_sql_line(postgres_server: Any) -> None:
    import psycopg

    from memento.storage.postgres_schema import migrate

    name = "memento_novector"
    base_super = postgres_server.superuser_dsn.rsplit("/", 1)[0]
    base_owner = postgres_server.owner_dsn.rsplit("/", 1)[0]
    with psycopg.connect(postgres_server.superuser_dsn, autocommit=True) as su:
        su.execute(f"DROP DATABASE IF EXISTS {name}")
        su.execute(f"CREATE DATABASE {name} OWNER memento_owner")
    try:
        with pytest.raises(Unavailable, match=rf"run once, as a superuser in database {name}: CREATE EXTENSION vector;$"):
            migrate(f"{base_owner}/{name}")  # the owner role may not create an untrusted extension
        with psycopg.connect(f"{base_owner}/{name}") as conn:  # and nothing was left half done
            assert conn.execute("SELECT to_regclass('agent_memory.fragments')").fetchone() == (None,)
        ran = migrate(f"{base_super}/{name}", app_role="memento_owner")  # a superuser's URL: created on the way
        assert "0001_initial.sql" in ran
        with psycopg.connect(f"{base_owner}/{name}") as conn:
            assert conn.execute("SELECT extname FROM pg_extension WHERE extname = 'vector'").fetchone() == ("vector",)
    finally:
        with psycopg.connect(postgres_server.superuser_dsn, autocommit=True) as su:
            su.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
