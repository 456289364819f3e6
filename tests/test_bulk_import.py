"""The bulk path of a large migration (docs/import.md "Migrating a large store"): a Memento export
whose fragment lines carry their vectors is imported without embedding them again, the others are
embedded or (`--defer-embedding`) left to the embedding worker; progress lines count, rate and time
left; a re-run stores nothing twice; a bad vector stops the import before anything is stored; and
bench/million.py runs end to end at a tiny size."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memento.app import App, build_app
from memento.cli.transfer import RateProgress
from memento.embeddings.hashing import HashEmbedder
from memento.exchange import wire
from memento.exchange.restore import RestoreFormatError
from memento.importers import import_path
from memento.models import AgentScope, CallContext, RememberInput
from memento.settings import Settings
from memento.storage.protocol import SearchFilter

ROOT = Path(__file__).resolve().parents[1]
AGENT = "bulk-agent"
HASH_MODEL = "hash:v1:256"


def unit(seed: int, dim: int = 256) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


@pytest.fixture
def stores(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> Iterator[Any]:
    """`stores(name)`: an App over an empty store of the backend under test (hash embedder)."""
    opened: list[App] = []

    def make(name: str) -> App:
        if backend == "sqlite":
            url = {"DATABASE_URL": f"sqlite:///{tmp_path / name}"}
        else:
            server = request.getfixturevalue("postgres_server")
            server.reset()
            url = {"DATABASE_URL": server.app_dsn, "DATABASE_MIGRATION_URL": server.owner_dsn}
        made = build_app(Settings(**url, EMBEDDING_PROVIDER="hash"), embedder=HashEmbedder(256))  # type: ignore[arg-type]
        opened.append(made)
        return made

    yield make
    for app in opened:
        app.close()


def export_lines(tmp_path: Path, count: int) -> list[dict[str, Any]]:
    """`count` memories of one agent as Memento export lines (header first, trailer last)."""
    source = build_app(Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'source.db'}", EMBEDDING_PROVIDER="hash"), embedder=HashEmbedder(256))
    try:
        for i in range(count):
            payload = {"content": f"Bulk memory number {i} about topic {i % 7}", "topic": f"t{i % 7}", "type": "fact", "agentId": AGENT}
            source.service.remember(RememberInput.model_validate(payload), CallContext())
        from memento.exchange.export import Exporter
        from memento.storage.records import RecordQuery

        text = "".join(Exporter(source.store, AgentScope("system"), RecordQuery(SearchFilter()), "ndjson").stream())
    finally:
        source.close()
    return [json.loads(line) for line in text.splitlines()]


def write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(wire.line(item) for item in lines), encoding="utf-8")
    return path


def with_vectors(lines: list[dict[str, Any]], models: list[str | None]) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """The fragment lines given vectors of `models` in turn (None: no vector); the vectors by id."""
    out, vectors, n = [], {}, 0
    for item in lines:
        if item.get("kind") == "fragment":
            model = models[n % len(models)]
            if model is not None:
                vectors[item["id"]] = unit(n)
                item = {**item, **wire.vector_fields(vectors[item["id"]], model)}
            n += 1
        out.append(item)
    return out, vectors


def best(app: App, vector: np.ndarray) -> tuple[str, float]:
    hit = app.store.vector_search(AgentScope(AGENT), vector, SearchFilter(), 1)[0]
    return hit.id, hit.score


@pytest.mark.backends("sqlite", "postgres")
def test_vectors_carried_in_the_file_are_kept_and_the_others_embedded(tmp_path: Path, stores: Any) -> None:
    lines, vectors = with_vectors(export_lines(tmp_path, 8), [HASH_MODEL, "other:model", None, HASH_MODEL])
    path = write(tmp_path / "export.jsonl", lines)
    app = stores("target.db")
    report = import_path(app.service, path)
    assert (report.stored, report.vectors) == (8, {"kept": 4, "embedded": 4, "pending": 0})
    kept = [i for i, item in enumerate(x for x in lines if x.get("kind") == "fragment") if i % 4 in (0, 3)]
    fragments = [x for x in lines if x.get("kind") == "fragment"]
    for i in kept:  # the file's own vector: searching with it finds its memory at similarity 1
        fid = fragments[i]["id"]
        found, score = best(app, vectors[fid])
        assert found == fid and score > 0.999
    other = fragments[1]["id"]  # another model's vector was not stored: the content's own was
    assert best(app, vectors[other])[1] < 0.9
    content = app.service.vectors.passages([fragments[1]["content"]])[0]
    found, score = best(app, content)
    assert found == other and score > 0.999


def test_a_deferred_import_leaves_the_rest_to_the_embedding_worker(tmp_path: Path, stores: Any) -> None:
    lines, _ = with_vectors(export_lines(tmp_path, 6), [HASH_MODEL, None])
    app = stores("target.db")
    report = import_path(app.service, write(tmp_path / "export.jsonl", lines), defer_embedding=True)
    assert (report.stored, report.vectors) == (6, {"kept": 3, "embedded": 0, "pending": 3})
    assert app.service.outbox.drain(30)  # the worker embeds what the import left
    assert app.store.missing_embeddings(AgentScope("system"), 10) == []


def test_a_re_run_stores_nothing_twice(tmp_path: Path, stores: Any) -> None:
    lines, _ = with_vectors(export_lines(tmp_path, 5), [HASH_MODEL])
    path = write(tmp_path / "export.jsonl", lines)
    app = stores("target.db")
    assert import_path(app.service, path).stored == 5
    again = import_path(app.service, path)
    assert (again.stored, again.already_known) == (0, 5)
    assert app.store.count(AgentScope(AGENT), SearchFilter()) == 5


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"embedding": "not base64!"}, "embedding: not base64"),
        ({"embedding": "AAAA" * 3}, "is not a float32 vector"),  # 9 bytes
        ({"embeddingModel": None}, "embeddingModel: the model of `embedding` is required"),
        ({"embedding": wire.vector_fields(np.array([np.nan, 1.0]), "m")["embedding"]}, "not a finite number"),
    ],
)
def test_a_bad_vector_stops_the_import_naming_its_line_and_nothing_is_stored(
    tmp_path: Path, stores: Any, change: dict[str, Any], message: str
) -> None:
    lines, _ = with_vectors(export_lines(tmp_path, 4), [HASH_MODEL])
    lines[3] = {**lines[3], **change}  # the third memory (line 4)
    app = stores("target.db")
    with pytest.raises(RestoreFormatError, match=f"export.jsonl:4: .*{message}"):
        import_path(app.service, write(tmp_path / "export.jsonl", lines))
    assert app.store.count(AgentScope(AGENT), SearchFilter()) == 0


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_lines_count_rate_and_time_left_at_each_tenth() -> None:
    out, clock = io.StringIO(), Ticks()
    progress = RateProgress(out, every_s=3600, clock=clock)
    for done in range(0, 1001, 50):  # 50 memories a second
        progress(done, 1000)
        clock.now += 1
    lines = out.getvalue().splitlines()
    assert lines[0] == "imported 0/1,000 memories (0%), 0/s, 0s elapsed"
    assert lines[5] == "imported 500/1,000 memories (50%), 50/s, 10s elapsed, 10s left"
    assert lines[-1] == "imported 1,000/1,000 memories (100%), 50/s, 20s elapsed"
    assert len(lines) == 11  # one a tenth of the way, no more


def test_progress_lines_come_every_few_seconds_between_tenths() -> None:
    out, clock = io.StringIO(), Ticks()
    progress = RateProgress(out, every_s=10, clock=clock)
    for done in range(30):  # a slow import: 30 calls, 5 s apart, all within the first tenth of 1,000
        progress(done, 1000)
        clock.now += 5
    assert len(out.getvalue().splitlines()) == 15  # the first, then one each 10 s


def test_the_command_prints_progress_and_the_vectors_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    from memento.cli import main

    lines, _ = with_vectors(export_lines(tmp_path, 4), [HASH_MODEL, None])
    path = write(tmp_path / "export.jsonl", lines)
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hash")
    monkeypatch.setenv("EMBEDDING_DIMENSIONS", "256")
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    assert main(["import", str(path), "--defer-embedding"]) == 0
    captured = capsys.readouterr()
    assert "imported 0/4 memories (0%)" in captured.err
    assert "imported 4/4 memories (100%)" in captured.err
    assert "4 stored" in captured.out
    assert "vectors: 2 kept from the file, 0 embedded, 2 left to the embedding worker" in captured.out
    assert main(["import", str(path), "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "0 stored, 4 already known" in captured.out and captured.err == ""


# ---------------------------------------------------------------- bench/million.py at a tiny size


def million_inputs(tmp_path: Path) -> list[str]:
    """bench/million.py's arguments for a tiny run: a summaries file and a stand-in vector cache."""
    texts = [f"package number {i} does thing {i % 13} with widgets and gadgets" for i in range(1500)]
    source = tmp_path / "summaries.txt"
    source.write_text("\n".join(texts) + "\n")
    cache = tmp_path / "cache"
    cache.mkdir()
    db = sqlite3.connect(cache / "local_multilingual-e5-small-q4.sqlite")
    db.execute("CREATE TABLE vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)")
    rows = []
    for i, text in enumerate(texts):  # a stand-in for the real model's vectors: the bench reads them by key
        digest = hashlib.sha256(text.encode()).hexdigest()
        rows += [("p:" + digest, unit(i, 384).tobytes()), ("q:" + digest, unit(10_000 + i, 384).tobytes())]
    db.executemany("INSERT INTO vectors VALUES (?, ?)", rows)
    db.commit()
    db.close()
    return ["--embed-cache", str(cache), "--distractor-source", str(source), "--work", str(tmp_path / "work")]


def run_million(args: list[str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "bench/million.py", "--real", "500", "--samples", "5", "--queries", "5", *args]
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT / 'bench'}"}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)


def test_the_million_bench_runs_at_a_tiny_size_and_prints_its_fields(tmp_path: Path) -> None:
    inputs = million_inputs(tmp_path)

    def stage(name: str) -> subprocess.CompletedProcess[str]:
        done = run_million(["--count", "2000", *inputs, "--stage", name])
        assert done.returncode == 0, done.stderr[-3000:]
        return done

    assert "export written: 2,000 memories" in stage("export").stdout
    done = stage("measure")
    assert "imported 2,000/2,000 memories (100%)" in done.stderr  # the importer's own progress lines
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["count"] > 1900 and figures["backend"] == "sqlite"  # a text masked into another is stored once
    for key in ("import_per_s", "importer_peak_rss_mb", "recall_store_p50_ms", "remember_store_p50_ms", "first_recall_ms"):
        assert figures[key] > 0, key
    assert 0.0 <= figures["recall_at_10"] <= 1.0 and "MB" in figures["disk"]
    assert "first_recall_after_restart_ms" in figures and "rss_after_first_recall_mb" in figures
    # the kept store timed again (after a code change), without importing anything
    again = json.loads(stage("time").stdout.strip().splitlines()[-1])
    assert again["stage"] == "time" and again["recall_store_p50_ms"] > 0 and "import_per_s" not in again
    assert (tmp_path / "work" / "export.jsonl").exists()  # a staged run keeps its folder


@pytest.mark.backends("postgres")
def test_the_million_bench_imports_into_postgres_with_the_index_set_aside(tmp_path: Path) -> None:
    done = run_million(["--count", "600", "--backend", "postgres", "--rebuild-vector-index", *million_inputs(tmp_path)])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "vector index fragments_embedding_hnsw dropped for the import" in done.stderr
    assert re.search(r"rebuilding vector index fragments_embedding_hnsw over \d{3} vectors", done.stderr)
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["backend"] == "postgres" and figures["rebuild_vector_index"] is True
    assert figures["import_per_s"] > 0 and 0.0 <= figures["recall_at_10"] <= 1.0 and "the HNSW index" in figures["disk"]


@pytest.mark.backends("postgres")
def test_the_million_bench_times_a_kept_postgres_store_again(tmp_path: Path, postgres_server: Any) -> None:
    """`--stage time --backend postgres --database-url` times a store the user kept running (a
    `measure` run throws its server away): here a database of the test server, filled by the
    import a user runs."""
    import psycopg

    inputs = million_inputs(tmp_path)
    assert run_million(["--count", "600", *inputs, "--stage", "export"]).returncode == 0
    name = "memento_million_kept"
    with psycopg.connect(postgres_server.superuser_dsn, autocommit=True) as su:
        su.execute(f"DROP DATABASE IF EXISTS {name}")
        su.execute(f"CREATE DATABASE {name} OWNER memento_owner")
    with psycopg.connect(postgres_server.superuser_dsn.rsplit("/", 1)[0] + f"/{name}", autocommit=True) as su:
        su.execute("CREATE EXTENSION IF NOT EXISTS vector")
    app_url, owner_url = (dsn.rsplit("/", 1)[0] + f"/{name}" for dsn in (postgres_server.app_dsn, postgres_server.owner_dsn))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "DATABASE_URL": app_url, "DATABASE_MIGRATION_URL": owner_url}
    imported = subprocess.run(
        [sys.executable, "-m", "memento", "import", str(tmp_path / "work" / "export.jsonl"), "--defer-embedding", "--no-progress"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    stored = re.search(r"(\d+) stored", imported.stdout)
    assert imported.returncode == 0 and stored and int(stored.group(1)) > 590, imported.stdout + imported.stderr[-3000:]
    inputs = [a for a in inputs if a != str(tmp_path / "work")][:-1]  # no --work: nothing but the server
    done = run_million(
        ["--count", "600", *inputs, "--stage", "time", "--backend", "postgres", "--database-url", app_url, "--migration-url", owner_url]
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["stage"] == "time" and figures["backend"] == "postgres" and "import_per_s" not in figures
    assert figures["recall_store_p50_ms"] > 0 and 0.0 <= figures["recall_at_10"] <= 1.0 and "the HNSW index" in figures["disk"]
    refused = run_million(["--count", "600", *inputs, "--stage", "time", "--backend", "postgres"])
    assert refused.returncode == 2 and "give its --database-url" in refused.stderr


@pytest.mark.backends("sqlite", "postgres")
def test_an_export_with_vectors_imports_into_another_store_without_embedding(
    tmp_path: Path, stores: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`memento export --with-vectors` writes each memory's stored vector; importing it into a
    store of the same model (here the backend under test) keeps every one."""
    from memento.cli import main

    lines = export_lines(tmp_path, 5)  # leaves source.db with 5 embedded memories
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hash")
    monkeypatch.setenv("EMBEDDING_DIMENSIONS", "256")
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'source.db'}")
    exported = tmp_path / "with-vectors.jsonl"
    assert main(["export", str(exported), "--with-vectors"]) == 0
    written = [json.loads(line) for line in exported.read_text().splitlines()]
    fragments = [x for x in written if x.get("kind") == "fragment"]
    assert len(fragments) == 5 and all(x["embeddingModel"] == HASH_MODEL for x in fragments)
    assert {x["id"] for x in fragments} == {x["id"] for x in lines if x.get("kind") == "fragment"}
    assert main(["export", str(tmp_path / "x.csv"), "--format", "csv", "--with-vectors"]) != 0  # ndjson only
    assert not (tmp_path / "x.csv").exists()
    app = stores("target.db")
    report = import_path(app.service, exported)
    assert (report.stored, report.vectors) == (5, {"kept": 5, "embedded": 0, "pending": 0})
    for item in fragments:
        found, score = best(app, wire._vector(item)[0])
        assert found == item["id"] and score > 0.999


# ---------------------------------------------------------------- PostgreSQL's bulk path
# restore_records sends a run of fragments without a session in one pipelined round trip
# (storage/postgres_records.py); `memento import --rebuild-vector-index` sets the HNSW index
# aside for the load and builds it again after (storage/postgres_vector_index.py).

OTHER = "other-agent"


def rich_export(tmp_path: Path, count: int) -> list[dict[str, Any]]:
    """An export of `count` memories with vectors (some of another model, some none), an amended
    one (versions), a link, a memory in a session, and two records that conflict: a second copy of
    a memory under a new id (the same content) and the same record twice (already present); then
    another memory under the skipped copy's id."""
    source = build_app(Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'rich.db'}", EMBEDDING_PROVIDER="hash"), embedder=HashEmbedder(256))
    try:
        ids = []
        for i in range(count):
            payload = {"content": f"Pipelined memory {i} on subject {i % 5}", "topic": f"s{i % 5}", "type": "fact", "agentId": AGENT}
            ids.append(source.service.remember(RememberInput.model_validate(payload), CallContext()).id)
        from memento.models import AmendInput, LinkInput

        source.service.amend(AmendInput(id=ids[1], content="Pipelined memory 1, amended", agentId=AGENT), CallContext())
        source.service.link(LinkInput(fromId=ids[2], toId=ids[3], agentId=AGENT), CallContext())
        from memento.exchange.export import Exporter
        from memento.storage.records import RecordQuery

        text = "".join(Exporter(source.store, AgentScope("system"), RecordQuery(SearchFilter()), "ndjson").stream())
    finally:
        source.close()
    lines, _ = with_vectors([json.loads(line) for line in text.splitlines()], [HASH_MODEL, None, "other:model"])
    fragments = [i for i, x in enumerate(lines) if x.get("kind") == "fragment"]
    lines[fragments[4]] = {**lines[fragments[4]], "sessionId": "session-7"}  # written one by one, between the runs
    twin = {**lines[fragments[5]], "id": "f" * 32}  # the same content under another id
    taker = {**lines[fragments[8]], "id": "f" * 32, "content": "A memory under the skipped copy's id", "contentHash": "0" * 16}
    lines[fragments[-1] + 1 : fragments[-1] + 1] = [twin, lines[fragments[6]], taker]
    trailer = lines[-1]
    trailer["counts"]["fragment"] = trailer["counts"]["fragment"] + 3
    return lines


def snapshot(server: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Every row the restore writes (fragments with their search and vector, the derived term and
    keyword rows, versions, links), as the owner sees them."""
    import psycopg

    mine = f"(SELECT id FROM agent_memory.fragments WHERE agent_id = '{AGENT}')"
    queries = {
        "fragments": f"SELECT f.*, f.search::text, f.embedding::text FROM agent_memory.fragments f WHERE agent_id = '{AGENT}' ORDER BY seq",
        "terms": f"SELECT * FROM agent_memory.fragment_terms WHERE agent_id = '{AGENT}' ORDER BY 1, 2",
        "keywords": f"SELECT * FROM agent_memory.fragment_keywords WHERE agent_id = '{AGENT}' ORDER BY 1, 2",
        "versions": f"SELECT * FROM agent_memory.fragment_versions WHERE fragment_id IN {mine} ORDER BY 1",
        "links": f"SELECT * FROM agent_memory.fragment_links WHERE from_id IN {mine} ORDER BY 1, 2",
    }
    with psycopg.connect(server.owner_dsn) as conn:
        conn.execute("SELECT set_config('app.current_agent_id', 'system', false)")
        return {name: [tuple(r) for r in conn.execute(sql).fetchall()] for name, sql in queries.items()}


@pytest.mark.backends("postgres")
def test_the_pipelined_restore_writes_exactly_what_the_row_by_row_path_wrote(tmp_path: Path, stores: Any, postgres_server: Any) -> None:
    lines = rich_export(tmp_path, 14)
    path = write(tmp_path / "rich.jsonl", lines)
    results = []
    for pipelined in (False, True):
        app = stores("target.db")  # empties the server's tables
        mine = {"content": "Another agent's own memory", "topic": "x", "type": "fact", "agentId": OTHER}
        other = app.service.remember(RememberInput.model_validate(mine), CallContext())
        app.store.records.pipelined = pipelined
        report = import_path(app.service, path).as_dict()
        assert [f.content for f in app.store.get_many(AgentScope(OTHER), [other.id])] == [mine["content"]]  # untouched
        results.append((report, snapshot(postgres_server)))
    (slow_report, slow_rows), (fast_report, fast_rows) = results
    assert fast_report == slow_report
    assert fast_rows == slow_rows
    assert (fast_report["stored"], fast_report["alreadyKnown"]) == (15, 1)
    assert len(fast_rows["versions"]) == 1 and len(fast_rows["links"]) == 1 and len(fast_rows["terms"]) > 14
    fragments = [x for x in lines if x.get("kind") == "fragment"]  # the copy under a new id skips only itself, saying why
    assert fast_report["skipped"] == [
        {"where": f"fragment {'f' * 32}", "reason": f"the same content is already stored as {fragments[5]['id']}"}
    ]


@pytest.mark.backends("postgres")
def test_an_interrupted_pipelined_import_resumes_where_it_stopped(tmp_path: Path, stores: Any, postgres_server: Any) -> None:
    from memento.exchange.restore import restore

    lines = rich_export(tmp_path, 14)
    path = write(tmp_path / "rich.jsonl", lines)
    app = stores("target.db")
    batches = []

    def stop_after_two(done: int, total: int) -> None:
        batches.append(done)
        if len(batches) == 2:
            raise KeyboardInterrupt  # the operator's ^C between two batches

    texts = [wire.line(x) for x in lines]
    with pytest.raises(KeyboardInterrupt):
        restore(app.store, AgentScope("system"), texts, "rich.jsonl", model=(HASH_MODEL, 256), progress=stop_after_two, batch_size=4)
    first = len(snapshot(postgres_server)["fragments"])
    assert first == 8  # two whole batches, each its own transaction
    report = import_path(app.service, path, defer_embedding=True)
    assert (report.stored, report.already_known) == (15 - first, first + 1)  # + the record given twice
    assert len(snapshot(postgres_server)["fragments"]) == 15


def index_definition(server: Any) -> str | None:
    import psycopg

    with psycopg.connect(server.owner_dsn) as conn:
        row = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'fragments_embedding_hnsw'").fetchone()
        return None if row is None else str(row[0])


def cli_env(monkeypatch: pytest.MonkeyPatch, url: str, owner: str | None) -> None:
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hash")
    monkeypatch.setenv("EMBEDDING_DIMENSIONS", "256")
    monkeypatch.setenv("DATABASE_URL", url)
    if owner is None:
        monkeypatch.delenv("DATABASE_MIGRATION_URL", raising=False)
    else:
        monkeypatch.setenv("DATABASE_MIGRATION_URL", owner)


@pytest.mark.backends("postgres")
def test_rebuild_vector_index_sets_the_index_aside_and_builds_the_same_one_after(
    tmp_path: Path, stores: Any, postgres_server: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from memento.cli import main

    lines, vectors = with_vectors(export_lines(tmp_path, 6), [HASH_MODEL])
    path = write(tmp_path / "export.jsonl", lines)
    stores("target.db").close()  # the schema, the index typed for 256 dimensions
    before = index_definition(postgres_server)
    assert before is not None and "hnsw" in before
    cli_env(monkeypatch, postgres_server.app_dsn, postgres_server.owner_dsn)
    assert main(["import", str(path), "--defer-embedding", "--rebuild-vector-index"]) == 0
    err = capsys.readouterr().err
    assert "vector index fragments_embedding_hnsw dropped for the import" in err
    assert "rebuilding vector index fragments_embedding_hnsw over 6 vectors" in err and "rebuilt" in err
    assert "analyzed fragments, fragment_terms, fragment_keywords" in err  # the plans see the new sizes at once
    assert index_definition(postgres_server) == before
    app = build_app(Settings(DATABASE_URL=postgres_server.app_dsn, EMBEDDING_PROVIDER="hash"), embedder=HashEmbedder(256))
    try:
        for fid, vector in vectors.items():  # searched through the rebuilt index
            assert best(app, vector)[0] == fid
    finally:
        app.close()


@pytest.mark.backends("postgres")
def test_the_index_is_rebuilt_when_the_import_fails_and_nothing_is_imported(
    tmp_path: Path, stores: Any, postgres_server: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from memento.cli import main

    lines, _ = with_vectors(export_lines(tmp_path, 4), [HASH_MODEL])
    path = write(tmp_path / "cut.jsonl", lines[:-1])  # cut short: no closing line
    app = stores("target.db")
    before = index_definition(postgres_server)
    cli_env(monkeypatch, postgres_server.app_dsn, postgres_server.owner_dsn)
    assert main(["import", str(path), "--rebuild-vector-index"]) == 1
    err = capsys.readouterr().err
    assert "the export was cut short" in err and "vector index fragments_embedding_hnsw rebuilt" in err
    assert index_definition(postgres_server) == before
    assert app.store.count(AgentScope(AGENT), SearchFilter()) == 0


@pytest.mark.backends("postgres")
def test_a_start_up_builds_the_vector_index_an_interrupted_import_left_missing(stores: Any, postgres_server: Any) -> None:
    import psycopg

    stores("target.db").close()
    before = index_definition(postgres_server)
    with psycopg.connect(postgres_server.owner_dsn, autocommit=True) as conn:  # as if the importer was killed mid-way
        conn.execute("DROP INDEX agent_memory.fragments_embedding_hnsw")
    assert index_definition(postgres_server) is None
    stores("target.db")
    assert index_definition(postgres_server) == before


@pytest.mark.backends("postgres")
def test_rebuild_vector_index_needs_the_owner_and_stops_before_importing(
    tmp_path: Path, stores: Any, postgres_server: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from memento.cli import main

    path = write(tmp_path / "export.jsonl", with_vectors(export_lines(tmp_path, 3), [HASH_MODEL])[0])
    app = stores("target.db")
    before = index_definition(postgres_server)
    cli_env(monkeypatch, postgres_server.app_dsn, None)  # the application role owns nothing
    assert main(["import", str(path), "--rebuild-vector-index"]) == 1
    assert "needs the table's owner: set DATABASE_MIGRATION_URL" in capsys.readouterr().err
    assert index_definition(postgres_server) == before
    assert app.store.count(AgentScope(AGENT), SearchFilter()) == 0


def test_rebuild_vector_index_is_refused_on_sqlite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    from memento.cli import main

    path = write(tmp_path / "export.jsonl", export_lines(tmp_path, 2))
    cli_env(monkeypatch, f"sqlite:///{tmp_path / 'cli.db'}", None)
    assert main(["import", str(path), "--rebuild-vector-index"]) == 1
    assert "--rebuild-vector-index applies to PostgreSQL" in capsys.readouterr().err
    assert main(["import", str(path), "--index-memory", "64"]) == 1
    assert "--index-memory goes with --rebuild-vector-index" in capsys.readouterr().err
    assert main(["import", str(path), "--no-progress"]) == 0  # nothing was imported before
    assert "2 stored" in capsys.readouterr().out


def test_the_memory_of_an_index_build_grows_with_the_vectors_within_bounds() -> None:
    from memento.storage.postgres_vector_index import MAX_MEMORY_MB, MIN_MEMORY_MB, definition, memory_mb

    assert memory_mb(0, 384) == MIN_MEMORY_MB
    assert MIN_MEMORY_MB < memory_mb(100_000, 384) < memory_mb(1_000_000, 384) <= MAX_MEMORY_MB
    assert memory_mb(100_000_000, 1024) == MAX_MEMORY_MB
    assert definition().startswith("CREATE INDEX fragments_embedding_hnsw ON agent_memory.fragments") and "m = 16" in definition()


def test_an_index_larger_than_the_buffer_cache_gets_advice_and_one_that_fits_none() -> None:
    from memento.storage.postgres_vector_index import advice

    assert advice(100 * 2**20, 128 * 2**20) is None
    text = advice(196 * 2**20, 128 * 2**20)
    assert text is not None and "(196 MB) is larger than PostgreSQL's shared_buffers (128 MB)" in text
    assert "above 294 MB" in text  # half as much again: the index and some of its tables


@pytest.mark.backends("postgres")
def test_a_start_up_compares_the_real_index_with_shared_buffers(
    stores: Any, postgres_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    import psycopg

    from memento.storage.postgres_vector_index import INDEX, memory_advice

    stores("target.db").close()
    with psycopg.connect(postgres_server.owner_dsn, autocommit=True) as conn:
        size = conn.execute("SELECT pg_relation_size(to_regclass(%s))", (f"agent_memory.{INDEX}",)).fetchone()
        buffers = conn.execute("SELECT pg_size_bytes(current_setting('shared_buffers'))").fetchone()
        assert size is not None and buffers is not None and 0 < size[0] < buffers[0]  # a test store fits
        assert memory_advice(conn) is None
    with caplog.at_level("WARNING"):
        stores("target.db").close()
    assert "shared_buffers" not in caplog.text
