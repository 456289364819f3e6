"""Export format version 2 (docs/export.md): a lossless round trip on every backend (export, import
into an empty store, export again: the same lines; every field, version, link, key, pin and the
entity graph compared), merging into a non-empty store, refusals that change nothing, the
readable formats parsed back, and the page-at-a-time reading the MCP tool and REST route use."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import Clock
from pg_harness import PostgresServer

from memento.app import App, build_app
from memento.embeddings.hashing import HashEmbedder
from memento.errors import Forbidden, InvalidArgument
from memento.exchange import formats, wire
from memento.exchange.export import Exporter, Position
from memento.exchange.restore import RestoreFormatError, check, restore
from memento.graph_inputs import CreateEntitiesInput, CreateRelationsInput, UpdateMemoryInput
from memento.models import AgentScope, AmendInput, CallContext, LinkInput, RecallInput, RelationType, RememberInput, TTLTier
from memento.settings import Settings
from memento.storage.protocol import SearchFilter
from memento.storage.records import RecordQuery
from memento.vault_models import CommitMemoryInput

SYSTEM = AgentScope("system")
EVERYTHING = RecordQuery(SearchFilter(all_sessions=True), include_forgotten=True)
LONG = "Stack trace of the nightly export failure: " + " ".join(f"frame{i} in module_{i}.py" for i in range(40))


def populate(app: App, clock: Clock) -> dict[str, str]:
    """Two agents and the pool with every kind of record: a cut memory with its detail, record
    fields, an amend trail, links, access statistics, a demoted tier, a keyed memory with the
    agent's own vector, working memory, a soft-forgotten memory and an entity graph."""
    s, ctx = app.service, CallContext()
    ids: dict[str, str] = {}

    def remember(name: str, **payload: Any) -> None:
        ids[name] = s.remember(RememberInput.model_validate(payload), ctx).id

    remember("long", content=LONG, topic="etl", type="error", tags=["etl", "nightly"], agentId="alice", importance=0.9)
    remember("fix", content="Raise the export worker memory to 2Gi", topic="etl", type="procedure", agentId="alice")
    remember(
        "pref",
        content="Alice reviews on Tuesdays",
        topic="team",
        type="preference",
        agentId="alice",
        record={
            "confidence": 0.6,
            "pinned": True,
            "metadata": {"k": 1, "nested": {"a": [1, 2]}},
            "context": "1:1 meeting",
            "originTrace": {"from": "chat"},
            "expiresAt": (clock.now + timedelta(days=400)).isoformat(),
        },
    )
    remember("gone", content="The old staging host was db-7", topic="infra", type="fact", agentId="alice")
    remember(
        "note", content="Working on the export ticket", topic="session", type="episode", agentId="alice", scope="session", sessionId="s-1"
    )
    remember("bob", content="Bob prefers tabs", topic="style", type="preference", agentId="bob")
    remember("pool", content="The wiki lives at wiki.internal", topic="infra", type="fact", record={"privacyScope": "public"})
    s.amend(AmendInput(id=ids["fix"], content="Raise the export worker memory to 4Gi", agentId="alice"), ctx)
    s.amend(AmendInput(id=ids["fix"], importance=0.8, tags=["etl", "sizing"], agentId="alice"), ctx)
    s.link(LinkInput(fromId=ids["long"], toId=ids["fix"], relationType=RelationType.RESOLVED_BY, agentId="alice"), ctx)
    s.link(LinkInput(fromId=ids["fix"], toId=ids["pool"], agentId="alice"), ctx)  # to the pool: only a whole-store export has it
    app.store.soft_delete(AgentScope("alice"), [ids["gone"]], clock.now)
    s.recall(RecallInput(text="export worker memory", agentId="alice"), ctx)
    app.store.flush_access()
    s.vault.commit(
        CommitMemoryInput(
            scope="vault", key="deploy-window", content="Deploys happen after 18:00", tags=["ops"], embedding=[0.25, -1.0, 3.5]
        ),
        CallContext(agent_id="alice"),
    )
    ids["keyed"] = app.store.page(AgentScope("alice"), SearchFilter(memory_key="deploy-window"), None, 1)[0].id
    ents = [{"name": "Nightly Export", "entity_type": "project", "description": "the ETL job", "metadata": {"owner": "data"}}]
    s.entities.create_entities(CreateEntitiesInput.model_validate({"entities": ents, "agent_id": "alice"}), ctx)
    rel = {"source": "Nightly Export", "target": "Worker Pool", "relation_type": "depends_on", "strength": 0.8, "context": "runbook"}
    s.entities.create_relations(CreateRelationsInput.model_validate({"relations": [rel], "agent_id": "alice"}), ctx)
    s.entities.update_memory(ids["long"], UpdateMemoryInput(entity_names=["Nightly Export"]), ctx, agent_id="alice")
    app.service.consolidator.maintenance.demote(
        AgentScope("alice"), TTLTier.HOT, TTLTier.WARM, clock.now + timedelta(days=1), None, clock.now
    )
    return ids


def export_text(app: App, scope: AgentScope = SYSTEM, query: RecordQuery = EVERYTHING, fmt: str = "ndjson") -> str:
    return "".join(Exporter(app.store, scope, query, fmt).stream())  # type: ignore[arg-type]


def body(text: str) -> list[str]:
    """The export's lines after its header (the header carries the export time)."""
    return text.splitlines()[1:]


def import_text(app: App, text: str, scope: AgentScope = SYSTEM, agent: str | None = None) -> Any:
    lines = text.splitlines()
    checked = check(lines, "export.jsonl", agent=agent)
    embed = app.service.vectors.passages
    return restore(
        app.store, scope, lines, "export.jsonl", embed=lambda t: list(embed(t)), agent=agent, total=checked.counts.get("fragment", 0)
    )


@pytest.fixture
def empty(tmp_path: Path, backend: str, request: pytest.FixtureRequest, clock: Clock) -> Iterator[Any]:
    """`empty()`: an empty store of the backend under test (the same PostgreSQL database, emptied;
    a new SQLite file), as an App; the ones opened are closed at the end."""
    opened: list[App] = []

    def make() -> App:
        for old in opened:
            old.close()
        if backend == "sqlite":
            url = {"DATABASE_URL": f"sqlite:///{tmp_path / f'empty-{len(opened)}.db'}"}
        else:
            server: PostgresServer = request.getfixturevalue("postgres_server")
            server.reset()
            url = {"DATABASE_URL": server.app_dsn, "DATABASE_MIGRATION_URL": server.owner_dsn}
        made = build_app(Settings(**url, EMBEDDING_PROVIDER="hash"), embedder=HashEmbedder(256), clock=clock)  # type: ignore[arg-type]
        opened.append(made)
        return made

    yield make
    for old in opened:
        old.close()


# ---------------------------------------------------------------- the lossless round trip


@pytest.mark.backends("sqlite", "postgres")
def test_a_round_trip_into_an_empty_store_gives_identical_records(app: App, clock: Clock, empty: Any) -> None:
    ids = populate(app, clock)
    before = {f.id: f for f in app.store.get_many(SYSTEM, list(ids.values()))}
    versions = app.store.versions(AgentScope("alice"), ids["fix"])
    text = export_text(app)
    app.close()
    target = empty()
    report = import_text(target, text)
    assert report.skipped_total == 0, report.skipped
    assert report.restored == {"fragment": 8, "versions": 2, "link": 2, "entity": 2, "relation": 1, "entityLink": 1}
    again = export_text(target)
    assert body(again) == body(text)  # every column of every record, in the same order
    after = {f.id: f for f in target.store.get_many(SYSTEM, list(ids.values()))}
    assert set(after) == set(before) == set(ids.values()) - {ids["gone"]}  # a forgotten memory stays forgotten
    for fid, old in before.items():
        new = after[fid]
        assert {**asdict(new), "seq": 0} == {**asdict(old), "seq": 0}, fid
    assert after[ids["long"]].detail == LONG and TTLTier.WARM in {f.ttl_tier for f in after.values()}  # the fixture demoted some
    assert (
        after[ids["keyed"]].memory_key == "deploy-window" and after[ids["keyed"]].client_embedding == before[ids["keyed"]].client_embedding
    )
    assert target.store.versions(AgentScope("alice"), ids["fix"]) == versions
    recalled = target.service.recall(RecallInput(text="export worker memory sizing", agentId="alice"), CallContext())
    assert ids["fix"] in [f.id for f in recalled.fragments]  # indexed and embedded by the importing store


@pytest.mark.backends("sqlite", "postgres")
def test_importing_into_a_store_that_has_some_records_merges_by_id(app: App, clock: Clock, empty: Any) -> None:
    populate(app, clock)
    text = export_text(app)
    first = import_text(app, text)  # into the store it came from: everything is there already
    assert first.restored.get("fragment", 0) == 0 and first.restored.get("versions", 0) == 0
    reasons = {s.reason for s in first.skipped}
    assert "already present" in reasons and first.skipped_total == 8 + 2 + 2 + 1 + 1
    assert body(export_text(app)) == body(text)  # nothing overwritten, nothing added


@pytest.mark.backends("sqlite", "postgres")
def test_an_agent_export_holds_only_that_agents_records(app: App, clock: Clock) -> None:
    ids = populate(app, clock)
    text = export_text(app, AgentScope("alice"), RecordQuery(SearchFilter()))
    records = [json.loads(x) for x in body(text)]
    fragments = {r["id"] for r in records if r["kind"] == "fragment"}
    assert fragments == {ids[n] for n in ("long", "fix", "pref", "keyed")}  # live, permanent, own rows only
    assert {r["agentId"] for r in records if "agentId" in r} == {"alice"}
    assert [(r["fromId"], r["toId"]) for r in records if r["kind"] == "link"] == [(ids["long"], ids["fix"])]
    assert "Bob prefers tabs" not in text and "wiki.internal" not in text
    head = json.loads(text.splitlines()[0])
    assert (head["format"], head["version"], head["agents"], head["fragments"]) == ("memento-export", 2, ["alice"], 4)


@pytest.mark.backends("sqlite", "postgres")
def test_an_agent_may_restore_only_its_own_records(app: App, clock: Clock, empty: Any) -> None:
    populate(app, clock)
    text = export_text(app)
    target = empty()
    with pytest.raises(Forbidden):
        import_text(target, text, AgentScope("alice"))
    assert target.store.record_owners(SYSTEM, EVERYTHING) == {}  # the refused batch wrote nothing
    report = import_text(target, text, AgentScope("carol"), agent="carol")  # mapped into one namespace
    assert report.agents == {"carol": 8}
    assert "Bob prefers tabs" in [f.content for f in target.store.page(AgentScope("carol"), SearchFilter(), None, 50)]


def test_a_file_cut_short_or_malformed_is_refused_before_anything_is_written(app: App, clock: Clock) -> None:
    populate(app, clock)
    lines = export_text(app).splitlines()
    with pytest.raises(RestoreFormatError, match="cut short"):
        check(lines[:-1], "x.jsonl")
    with pytest.raises(RestoreFormatError, match="counts"):
        check([*lines[:3], *lines[4:]], "x.jsonl")
    bad = json.loads(lines[1])
    bad["importance"] = 7
    with pytest.raises(RestoreFormatError, match=r"x.jsonl:2: importance"):
        check([lines[0], json.dumps(bad), *lines[2:]], "x.jsonl")
    with pytest.raises(RestoreFormatError, match="header"):
        check(lines[1:], "x.jsonl")


# ---------------------------------------------------------------- pages and the readable formats


def test_pages_resume_where_the_last_one_stopped(app: App, clock: Clock) -> None:
    populate(app, clock)
    whole = body(export_text(app))
    exporter = Exporter(app.store, SYSTEM, EVERYTHING, "ndjson", page=2)
    seen: list[str] = []
    position = Position()
    while True:
        chunk = list(_take(exporter, position, 3))
        if not chunk:
            break
        seen += [text.rstrip("\n") for text, _ in chunk]
        position = Position.parse(chunk[-1][1].token("ndjson"), "ndjson")
    assert seen == whole[:-1]  # every record once, in order (the trailer is the stream's own)
    with pytest.raises(InvalidArgument):
        Position.parse(Position(1, 5).token("csv"), "ndjson")
    with pytest.raises(InvalidArgument):
        Position.parse("not a cursor", "ndjson")


def _take(exporter: Exporter, start: Position, n: int) -> Iterator[tuple[str, Position]]:
    for i, item in enumerate(exporter.body(start)):
        if i == n:
            return
        yield item


def test_csv_has_one_row_per_memory_under_the_documented_columns(app: App, clock: Clock) -> None:
    ids = populate(app, clock)
    rows = list(csv.DictReader(io.StringIO(export_text(app, AgentScope("alice"), RecordQuery(SearchFilter()), "csv"), newline="")))
    assert tuple(rows[0]) == formats.CSV_COLUMNS
    by_id = {r["id"]: r for r in rows}
    assert set(by_id) == {ids[n] for n in ("long", "fix", "pref", "keyed")}
    assert by_id[ids["long"]]["detail"] == LONG and by_id[ids["long"]]["tags"] == "etl;nightly"
    assert by_id[ids["pref"]]["pinned"] == "true" and json.loads(by_id[ids["pref"]]["metadata"]) == {"k": 1, "nested": {"a": [1, 2]}}
    assert by_id[ids["keyed"]]["memoryKey"] == "deploy-window"


def test_markdown_has_a_heading_per_memory(app: App, clock: Clock) -> None:
    ids = populate(app, clock)
    text = export_text(app, AgentScope("alice"), RecordQuery(SearchFilter()), "markdown")
    sections = text.split("\n## ")[1:]
    assert len(sections) == 4 and text.startswith("# Memento export")
    long = next(s for s in sections if ids["long"] in s)
    assert long.startswith("etl: Stack trace") and LONG in long and "tags: etl, nightly" in long


def test_a_markdown_note_has_front_matter_with_the_record(app: App, clock: Clock) -> None:
    ids = populate(app, clock)
    row = next(r for r in app.store.record_page(SYSTEM, "fragments", EVERYTHING, 0, 50) if r["id"] == ids["pref"])
    note = formats.markdown_note(row)
    _, front, text = note.split("---\n", 2)
    meta = yaml.safe_load(front)
    assert meta["id"] == ids["pref"] and meta["type"] == "preference" and meta["pinned"] is True
    assert meta["topic"] == "team" and meta["memorySystem"] == "semantic" and meta["tags"] == []
    assert meta["createdAt"] == wire.timestamp(row["created_at"])  # type: ignore[arg-type]
    assert text.strip() == "# team\n\nAlice reviews on Tuesdays"


@pytest.mark.backends("postgres")
def test_a_sqlite_export_restores_into_postgresql_identically(app: App, clock: Clock, tmp_path: Path) -> None:
    source = build_app(
        Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'source.db'}", EMBEDDING_PROVIDER="hash"), embedder=HashEmbedder(256), clock=clock
    )
    try:
        ids = populate(source, clock)
        source.service.settle(30)  # every vector stored before the export and the snapshot (the outbox embeds after the write)
        text = export_text(source)
        before = {f.id: f for f in source.store.get_many(SYSTEM, list(ids.values()))}
    finally:
        source.close()
    report = import_text(app, text)  # `app` is the emptied PostgreSQL
    assert report.skipped_total == 0, report.skipped
    assert [json.loads(x) for x in body(export_text(app))] == [json.loads(x) for x in body(text)]
    after = {f.id: f for f in app.store.get_many(SYSTEM, list(ids.values()))}
    assert {k: {**asdict(f), "seq": 0} for k, f in after.items()} == {k: {**asdict(f), "seq": 0} for k, f in before.items()}


def test_a_folder_of_notes_imports_through_the_basic_memory_reader(app: App, clock: Clock, empty: Any, tmp_path: Path) -> None:
    from memento.cli.export import export_notes
    from memento.importers import import_path

    ids = populate(app, clock)
    folder = tmp_path / "notes"
    report = export_notes(app.store, folder, agents=["alice"])
    assert report.fragments == 4 and sorted(p.name for p in folder.iterdir()) == sorted(
        f"{ids[n]}.md" for n in ("long", "fix", "pref", "keyed")
    )
    target = empty()
    imported = import_path(target.service, folder, fmt="basic-memory", agent="alice")
    assert imported.stored >= 4
    texts = " ".join(f.content + " " + (f.detail or "") for f in target.store.page(AgentScope("alice"), SearchFilter(), None, 100))
    assert "Alice reviews on Tuesdays" in texts and "frame39 in module_39.py" in texts


def test_the_tool_pages_join_into_the_whole_export_within_the_character_cap(app: App, clock: Clock) -> None:
    from memento.exchange.page import PAGE_CHARS, ExportInput, export_page

    s, alice = app.service, CallContext(agent_id="alice")
    for i in range(12):  # each line over 3,000 characters (the whole text travels as `detail`): more than one page
        s.remember(
            RememberInput(
                content=f"Runbook step {i}: " + "restart the worker and check the queue depth. " * 70, topic="ops", type="procedure"
            ),
            alice,
        )
    s.remember(RememberInput(content="Bob's own note", topic="ops", type="fact"), CallContext(agent_id="bob"))
    pages = [export_page(s, ExportInput(limit=500), alice)]
    while pages[-1].next_cursor:
        pages.append(export_page(s, ExportInput(limit=500, cursor=pages[-1].next_cursor), alice))
    assert len(pages) > 1 and all(len(p.text) <= PAGE_CHARS for p in pages)
    joined = "".join(p.text for p in pages)
    assert body(joined) == body(export_text(app, AgentScope("alice"), RecordQuery(SearchFilter())))
    assert sum(p.count for p in pages) == 12 and "Bob's own note" not in joined
    checked = check(joined.splitlines(), "pages")
    assert checked.counts == {"fragment": 12, "versions": 0}
    with pytest.raises(Forbidden):
        export_page(s, ExportInput(agentId="bob"), alice)
    with pytest.raises(InvalidArgument, match="agentId"):
        export_page(s, ExportInput(agentId="system"), CallContext(agent_id="admin"))
    only = export_page(s, ExportInput(format="csv", filters={"tags": ["none-such"]}), alice)
    assert only.count == 0 and only.next_cursor is None and only.text.startswith("id,agentId")
