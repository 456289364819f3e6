"""`memento import`: one sample per format (tests/data/import/, written in each tool's documented
format) imported into a real store and recalled through the service; re-imports store nothing
new; a malformed input stores nothing; namespaces stay apart; the console script works from the
runtime-only environment."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pysqlite3.dbapi2 as sqlite3
import pytest
import sqlite_vec
from runtime_env import runtime_python

from memento.errors import InvalidArgument
from memento.graph_inputs import CreateEntitiesInput, CreateRelationsInput, UpdateMemoryInput
from memento.importers import FORMATS, ImportFormatError, detect_format, import_path
from memento.models import AgentScope, CallContext, GraphExploreInput, RecallInput, RelationType
from memento.results import RecallItem
from memento.service import MemoryService

DATA = Path(__file__).resolve().parent / "data" / "import"
BAD = DATA / "bad"
NO_PII = ("ada.lovelace@", "northwind.example", "415 555 0134", "hunter2", "etl-admin@", "maria.silva@", "dba-oncall@")


def mcp_memory_db(folder: Path, script: Path = DATA / "mcp-memory-service.sql") -> Path:
    """The mcp-memory-service database the sample script describes (with its sqlite-vec table)."""
    path = folder / "sqlite_vec.db"
    conn = sqlite3.connect(str(path))
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.enable_load_extension(False)
    conn.executescript(script.read_text(encoding="utf-8"))
    conn.commit()
    conn.close()
    return path


MTIME = datetime(2025, 5, 6, 7, 8, 9, tzinfo=UTC)


def basic_memory_folder(folder: Path, source: Path = DATA / "basic-memory") -> Path:
    """A copy of the sample folder whose files carry a known mtime (the created time of notes
    without a `created` field)."""
    target = folder / "notes"
    shutil.copytree(source, target)
    for file in target.rglob("*.md"):
        os.utime(file, (MTIME.timestamp(), MTIME.timestamp()))
    return target


SAMPLES: dict[str, Callable[[Path], Path]] = {
    "memento": lambda tmp: DATA / "memento-export.jsonl",
    "server-memory": lambda tmp: DATA / "server-memory.jsonl",
    "mem0": lambda tmp: DATA / "mem0.json",
    "basic-memory": basic_memory_folder,
    "mcp-memory-service": mcp_memory_db,
}


def recall_all(service: MemoryService, agent: str | None = None) -> dict[str, RecallItem]:
    """Every memory the agent sees, by content (recall without a query lists them)."""
    found = service.recall(RecallInput(limit=200, tokenBudget=100_000, includeLinks=False, agentId=agent), CallContext())
    return {f.content: f for f in found.fragments}


def search(service: MemoryService, text: str, agent: str | None = None) -> list[RecallItem]:
    return service.recall(RecallInput(text=text, limit=5, includeLinks=False, agentId=agent), CallContext()).fragments


def edges(service: MemoryService, fragment_id: str, agent: str = "default") -> set[tuple[str, str, RelationType]]:
    found = service.store.neighbours(AgentScope(agent), [fragment_id], list(RelationType), 200)
    return {(e.from_id, e.to_id, e.relation_type) for e, _ in found}


def created(item: RecallItem) -> datetime:
    return datetime.fromisoformat(item.created_at)


def assert_masked(memories: dict[str, RecallItem]) -> None:
    leaked = [c for c in memories if any(p in c for p in NO_PII)]
    assert leaked == []


# ---------------------------------------------------------------- each format


@pytest.mark.backends("sqlite", "postgres")
def test_memento_export_into_an_empty_store_reproduces_the_memories(service: MemoryService) -> None:
    report = import_path(service, DATA / "memento-export.jsonl")
    assert (report.format, report.read, report.stored, report.already_known, report.links) == ("memento", 8, 6, 0, 3)
    assert report.agents == {"default": 4, "research-bot": 2}
    assert [s.where.rsplit(":", 1)[1] for s in report.skipped] == ["8", "12"]  # the expired fragment and its link
    exported = {
        item["id"]: item
        for item in map(json.loads, (DATA / "memento-export.jsonl").read_text(encoding="utf-8").splitlines()[1:])
        if item["kind"] == "fragment"
    }
    stored = recall_all(service) | recall_all(service, "research-bot")
    by_id = {f.id: f for f in stored.values()}
    assert set(by_id) == set(exported) - {"frag-60718293041526a7"}  # ids kept; the expired one left out
    for fid, view in by_id.items():
        source = exported[fid]
        assert view.agent_id == source["agentId"]
        for name in ("topic", "type", "importance", "isAnchor", "source", "confidence", "tags", "memorySystem", "pinned",
                     "privacyScope", "context", "metadata", "originTrace", "expiresAt"):  # fmt: skip
            assert view.dump()[name] == source[name], (fid, name)
        assert created(view) == datetime.fromisoformat(source["createdAt"])
        if "@" not in source["content"]:
            assert view.content == source["content"]
    assert by_id["frag-4e5f607182930415"].content == "Survey author contact: [REDACTED_EMAIL] (corresponding author)"
    assert ("frag-1b2c3d4e5f607182", "frag-2c3d4e5f60718293", RelationType.RESOLVED_BY) in edges(service, "frag-1b2c3d4e5f607182")
    assert ("frag-2c3d4e5f60718293", "frag-1b2c3d4e5f607182", RelationType.RELATED) in edges(service, "frag-2c3d4e5f60718293")
    assert ("frag-4e5f607182930415", "frag-5f60718293041526", RelationType.RELATED) in edges(
        service, "frag-4e5f607182930415", "research-bot"
    )
    assert search(service, "British English spelling")[0].id == "frag-3d4e5f6071829304"


def test_server_memory_entities_observations_and_relations(service: MemoryService) -> None:
    report = import_path(service, DATA / "server-memory.jsonl")
    assert (report.format, report.read, report.stored, report.links, report.skipped) == ("server-memory", 18, 18, 18, [])
    memories = recall_all(service)
    go = memories["Ledger_Service: Written in Go; owns the double-entry bookkeeping tables"]
    assert (go.type.value, go.topic, go.tags, go.source) == ("observation", "Ledger_Service", ["service"], "import:server-memory")
    assert go.metadata == {"entity": "Ledger_Service", "entityType": "service"}
    assert "Zoë_Müller: Übernimmt die Rufbereitschaft im Büro München — spricht Deutsch und 日本語" in memories
    assert "Ada_Lovelace: Reachable at [REDACTED_EMAIL] for on-call escalations" in memories
    assert_masked(memories)
    heads = {name: memories[text].id for name, text in (("ada", "Ada_Lovelace is a person"), ("northwind", "Northwind is an organization"),
             ("ledger", "Ledger_Service is a service"), ("outage", "Q3_Outage is an event"))}  # fmt: skip
    assert (go.id, heads["ledger"], RelationType.PART_OF) in edges(service, go.id)
    assert (heads["ledger"], heads["northwind"], RelationType.PART_OF) in edges(service, heads["ledger"])
    assert (heads["ada"], heads["northwind"], RelationType.RELATED) in edges(service, heads["ada"])
    graph = service.graph_explore(GraphExploreInput(startId=heads["outage"]), CallContext())
    assert {(e.from_, e.to, e.relation) for e in graph.edges} == {(heads["outage"], heads["ledger"], RelationType.CAUSED_BY)}
    relation = memories["Ada_Lovelace works at Northwind"]
    assert (relation.type.value, relation.topic) == ("relation", "Ada_Lovelace")
    assert search(service, "who maintains the ledger service")[0].content == "Ada_Lovelace maintains Ledger_Service"


def test_mem0_memories_keep_dates_categories_and_scopes(service: MemoryService) -> None:
    report = import_path(service, DATA / "mem0.json")
    assert (report.format, report.read, report.stored, report.links) == ("mem0", 5, 4, 0)
    assert [s.reason for s in report.skipped] == ["expired on 2023-05-10"]
    memories = recall_all(service)
    food = memories["Is vegetarian and allergic to peanuts"]
    assert (food.type.value, food.topic, food.tags, food.source) == ("fact", "food", ["food", "health", "user:alex"], "import:mem0")
    assert created(food) == datetime.fromisoformat("2024-07-26T10:29:36.630547-07:00")
    assert food.metadata["source"] == "onboarding-chat"
    assert food.metadata["mem0"]["id"] == "7c1f2a4e-0b6d-4c2a-9b1e-3f5d8a9c0e11"
    seat = memories["Prefers window seats on flights longer than four hours"]
    assert (seat.type.value, seat.pinned) == ("preference", True)  # user_preferences; immutable
    travel = next(m for c, m in memories.items() if c.startswith("To book team travel"))
    assert (travel.type.value, travel.memory_system.value) == ("procedure", "procedural")
    assert "agent:travel-assistant" in travel.tags
    contact = memories["Emergency contact phone is [REDACTED_PHONE]; lives in São Paulo part of the year and speaks Português"]
    assert "run:onboarding-2024-10" in contact.tags
    assert_masked(memories)
    assert search(service, "food allergies")[0].content == "Is vegetarian and allergic to peanuts"


def test_basic_memory_notes_observations_and_relations(service: MemoryService, tmp_path: Path) -> None:
    report = import_path(service, basic_memory_folder(tmp_path))
    assert (report.format, report.read, report.stored, report.links) == ("basic-memory", 18, 17, 17)
    assert [s.reason for s in report.skipped] == ["link to [[Fraud Scoring]]: no such note in the folder (the relation memory is kept)"]
    memories = recall_all(service)
    assert not any("hidden folder" in c for c in memories)  # .obsidian/ is left out
    lock = memories["Use PostgreSQL advisory locks to serialise postings per account"]
    assert (lock.type.value, lock.topic, lock.context) == ("decision", "Payment Ledger", "chosen after the Q3 outage")
    assert lock.tags == ["payments", "postgres", "locking"]
    assert lock.metadata["category"] == "decision"
    assert lock.metadata["frontmatter"] == {"created": "2025-02-03T09:00:00+00:00", "status": "active", "owner": "payments-team"}
    assert created(lock) == datetime(2025, 2, 3, 9, 0, tzinfo=UTC)  # the note's `created` field
    assert memories["Money amounts are stored as integer cents, never floats"].type.value == "preference"
    assert memories["Posting twice on retry created duplicate entries until idempotency keys were added"].type.value == "error"
    assert "Le grand livre est audité chaque trimestre — 監査は四半期ごと" in memories
    dba = memories["DBA on call for failovers: [REDACTED_EMAIL]"]
    assert created(dba) == MTIME and dba.tags == ["database", "postgres"]  # no `created`: the file's mtime
    assert_masked(memories)
    ledger = next(m for c, m in memories.items() if c.startswith("Payment Ledger: The payment ledger records"))
    # the long note body is one memory: cut at 300 characters, its whole text kept as detail
    assert ledger.detail is not None and "Writes go through the ledger service" in ledger.detail
    assert not any(c.startswith("Writes go through the ledger service") for c in memories)
    database = memories["Ledger Database: PostgreSQL 16 cluster with one primary and two replicas."]
    handbook = memories["Engineering Handbook: How the engineering team works: reviews, releases and on-call."]
    links = edges(service, ledger.id)
    assert (lock.id, ledger.id, RelationType.PART_OF) in links
    assert {(ledger.id, database.id, RelationType.RELATED), (ledger.id, handbook.id, RelationType.PART_OF)} <= links
    assert "Payment Ledger relates to Fraud Scoring" in memories
    assert search(service, "how do we fail over the database")[0].content.startswith("Fail over with `patronictl switchover`")


def test_mcp_memory_service_database(service: MemoryService, tmp_path: Path) -> None:
    report = import_path(service, mcp_memory_db(tmp_path))
    assert (report.format, report.read, report.stored, report.links) == ("mcp-memory-service", 8, 6, 4)
    assert sorted(s.reason for s in report.skipped) == ["deleted in mcp-memory-service", "edge to a memory that is deleted or absent"]
    memories = recall_all(service)
    bug = next(m for c, m in memories.items() if c.startswith("ETL job failed"))
    fix = next(m for c, m in memories.items() if c.startswith("Fixed the connection storm"))
    decision = next(m for c, m in memories.items() if c.startswith("Decided to run the nightly ETL"))
    assert (bug.type.value, fix.type.value, decision.type.value) == ("error", "learning", "decision")
    assert (bug.topic, bug.tags, bug.source) == ("etl", ["etl", "postgres"], "import:mcp-memory-service")
    assert created(bug) == datetime(2025, 1, 20, 22, 5, tzinfo=UTC)
    assert fix.metadata["confidence"] == 0.9 and fix.metadata["mcpMemoryService"]["memoryType"] == "learning"
    assert {(bug.id, fix.id, RelationType.RESOLVED_BY), (bug.id, decision.id, RelationType.CAUSED_BY)} <= edges(service, bug.id)
    (review,) = [m for c, m in memories.items() if m.type.value == "episode"]
    # a long memory is one memory: its first 300 characters are the content, the whole its detail
    assert len(review.content) <= 300 and review.content.endswith("…")
    assert review.detail is not None and len(review.detail) > 300 and review.detail.startswith(review.content[:-1])
    assert "Staging database password is [REDACTED_PWD] and the admin login is [REDACTED_EMAIL]" in memories
    assert "Der nächtliche Export läuft um 02:00 Uhr MEZ — 毎晩2時に実行されます." in memories
    assert not any("retired" in c for c in memories)  # the soft-deleted row
    assert_masked(memories)


# ---------------------------------------------------------------- every format


@pytest.mark.backends("sqlite", "postgres")
@pytest.mark.parametrize("fmt", FORMATS)
def test_importing_the_same_input_again_stores_nothing_new(service: MemoryService, tmp_path: Path, fmt: str) -> None:
    path = SAMPLES[fmt](tmp_path)
    assert detect_format(path) == fmt
    first = import_path(service, path)
    count = len(recall_all(service)) + len(recall_all(service, "research-bot"))
    again = import_path(service, path)
    assert (again.stored, again.already_known, again.links, again.links_known) == (0, first.stored, 0, first.links)
    assert len(recall_all(service)) + len(recall_all(service, "research-bot")) == count


@pytest.mark.parametrize(
    ("fmt", "make", "where"),
    [
        ("server-memory", lambda tmp: BAD / "server-memory.jsonl", "server-memory.jsonl:3: not JSON"),
        ("mem0", lambda tmp: BAD / "mem0.json", "mem0.json#memory 2: 'memory' must be a string"),
        ("basic-memory", lambda tmp: BAD / "basic-memory", "broken-frontmatter.md:4: the frontmatter is not valid YAML"),
        (
            "mcp-memory-service",
            lambda tmp: mcp_memory_db(tmp, BAD / "mcp-memory-service.sql"),
            "sqlite_vec.db#memories id=2: metadata is not JSON",
        ),
        ("memento", lambda tmp: BAD / "memento.jsonl", "memento.jsonl:3: importance: Input should be less than or equal to 1"),
    ],
)
def test_a_malformed_input_is_a_clear_error_and_stores_nothing(
    service: MemoryService, tmp_path: Path, fmt: str, make: Callable[[Path], Path], where: str
) -> None:
    with pytest.raises(ImportFormatError) as caught:
        import_path(service, make(tmp_path), fmt=fmt)
    assert where in caught.value.message
    assert recall_all(service) == {}


def test_an_input_of_unknown_shape_is_refused(service: MemoryService, tmp_path: Path) -> None:
    odd = tmp_path / "notes.json"
    odd.write_text('{"hello": "world"}', encoding="utf-8")
    with pytest.raises(ImportFormatError, match="cannot tell the format; give --format"):
        import_path(service, odd)
    with pytest.raises(ImportFormatError, match="notes.json:1: .type. must be .entity. or .relation."):
        import_path(service, odd, fmt="server-memory")
    assert recall_all(service) == {}


def test_an_invalid_agent_is_refused_before_reading(service: MemoryService) -> None:
    with pytest.raises(InvalidArgument, match="agent 'two words' is not a valid agent id"):
        import_path(service, DATA / "mem0.json", agent="two words")
    assert recall_all(service) == {}


def test_a_dry_run_validates_and_stores_nothing(service: MemoryService) -> None:
    report = import_path(service, DATA / "server-memory.jsonl", dry=True)
    assert (report.dry_run, report.memories, report.stored) == (True, 18, 0)
    assert recall_all(service) == {}


# ---------------------------------------------------------------- namespaces and ids


@pytest.mark.backends("sqlite", "postgres")
def test_memories_imported_into_an_agent_are_invisible_to_another(service: MemoryService) -> None:
    report = import_path(service, DATA / "server-memory.jsonl", agent="agent-a")
    assert report.agents == {"agent-a": 18}
    assert len(recall_all(service, "agent-a")) == 18
    assert recall_all(service, "agent-b") == {} and recall_all(service) == {}
    assert search(service, "Ledger service written in Go", "agent-b") == []
    assert search(service, "Ledger service written in Go", "agent-a")[0].agent_id == "agent-a"


def test_agent_option_puts_a_whole_export_in_one_namespace(service: MemoryService) -> None:
    report = import_path(service, DATA / "memento-export.jsonl", agent="restored")
    assert report.agents == {"restored": 6}
    assert len(recall_all(service, "restored")) == 6 and recall_all(service, "research-bot") == {}


@pytest.mark.backends("sqlite", "postgres")
def test_an_id_already_taken_gets_a_fresh_one_and_links_follow(service: MemoryService, tmp_path: Path) -> None:
    lines = (DATA / "memento-export.jsonl").read_text(encoding="utf-8").splitlines()
    squatter = json.loads(lines[2]) | {"agentId": "someone-else", "content": "Another memory that happens to hold the same id"}
    taken = tmp_path / "taken.jsonl"
    taken.write_text("\n".join([lines[0], json.dumps(squatter)]) + "\n", encoding="utf-8")
    import_path(service, taken)  # frag-1b2c3d4e5f607182 now belongs to another namespace

    report = import_path(service, DATA / "memento-export.jsonl")
    assert (report.stored, report.links) == (6, 3)
    memories = recall_all(service)
    rollback = memories["Rollback of release 4.2 was caused by a missing database migration"]
    assert rollback.id != "frag-1b2c3d4e5f607182"
    assert (rollback.id, "frag-2c3d4e5f60718293", RelationType.RESOLVED_BY) in edges(service, rollback.id)
    assert [f.content for f in recall_all(service, "someone-else").values() if f.agent_id == "someone-else"] == [squatter["content"]]


# ---------------------------------------------------------------- the console script


@pytest.mark.slow
def test_console_script_from_the_runtime_environment(tmp_path: Path) -> None:
    memento = str(Path(runtime_python()).parent / "memento")
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'm.db'}", "EMBEDDING_PROVIDER": "hash", "LOG_LEVEL": "WARNING"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([memento, "import", *args], env=env, capture_output=True, text=True, timeout=120, check=False)

    first = run(str(DATA / "mem0.json"), "--json")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert (report["format"], report["stored"], report["alreadyKnown"]) == ("mem0", 4, 0)
    assert report["skipped"] == [{"where": f"{DATA / 'mem0.json'}#memory 5", "reason": "expired on 2023-05-10"}]
    again = run(str(DATA / "mem0.json"))
    assert again.returncode == 0, again.stderr
    assert "0 stored, 4 already known" in again.stdout
    folder = basic_memory_folder(tmp_path)
    assert "17 stored" in run(str(folder), "--format", "basic-memory").stdout
    bad = run(str(BAD / "server-memory.jsonl"))
    assert bad.returncode == 1
    assert "server-memory.jsonl:3: not JSON" in bad.stderr
    recalled = subprocess.run(
        [memento, "recall", "peanut allergy", "--json"], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(recalled.stdout)["fragments"][0]["content"] == "Is vegetarian and allergic to peanuts"


def test_export_then_import_round_trips_every_memory_link_and_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`memento export` from one store, `memento import` into an empty one: the same memories
    (ids, content and full detail, record fields, agents) and the same links."""
    from memento.app import build_app
    from memento.cli import main
    from memento.embeddings.hashing import HashEmbedder
    from memento.models import LinkInput, RememberInput
    from memento.settings import Settings

    def open_store(name: str) -> Any:
        return build_app(Settings(DATABASE_URL=f"sqlite:///{tmp_path / name}", EMBEDDING_PROVIDER="hash"), embedder=HashEmbedder(256))

    long_text = "Stack trace of the nightly export failure: " + " ".join(f"frame{i} in module_{i}.py" for i in range(40))
    source = open_store("a.db")
    try:
        s, ctx = source.service, CallContext()
        ids = [
            s.remember(RememberInput.model_validate(payload), ctx).id
            for payload in (
                {"content": long_text, "topic": "etl", "type": "error", "tags": ["etl"], "agentId": "alice"},
                {"content": "Raise the export worker memory to 2Gi", "topic": "etl", "type": "procedure", "agentId": "alice"},
                {
                    "content": "Bob prefers tabs",
                    "topic": "style",
                    "type": "preference",
                    "agentId": "bob",
                    "record": {"confidence": 0.6, "pinned": True, "metadata": {"k": 1}, "context": "code review"},
                },
            )
        ]
        s.link(LinkInput(fromId=ids[0], toId=ids[1], relationType="resolved_by", agentId="alice"), ctx)
        # seed 001's graph: entities (one described, one only named), a relation, associations
        ents = [{"name": "Nightly Export", "entity_type": "project", "description": "the ETL job", "metadata": {"owner": "data"}}]
        s.entities.create_entities(CreateEntitiesInput.model_validate({"entities": ents, "agent_id": "alice"}), ctx)
        rel = {"source": "Nightly Export", "target": "Worker Pool", "relation_type": "depends_on", "strength": 0.8, "context": "runbook"}
        s.entities.create_relations(CreateRelationsInput.model_validate({"relations": [rel], "agent_id": "alice"}), ctx)
        s.entities.update_memory(ids[0], UpdateMemoryInput(entity_names=["Nightly Export"]), ctx, agent_id="alice")
        s.entities.update_memory(ids[2], UpdateMemoryInput(entity_names=["Tabs"]), ctx, agent_id="bob")
        graph_before = _graph_of(s)
        before = {f.id: f for f in source.store.get_many(AgentScope("system"), ids)}
    finally:
        source.close()
    exported = tmp_path / "memories.jsonl"
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hash")
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'a.db'}")
    assert main(["export", str(exported)]) == 0
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'b.db'}")
    assert main(["import", str(exported)]) == 0
    target = open_store("b.db")
    try:
        after = {f.id: f for f in target.store.get_many(AgentScope("system"), ids)}
        assert set(after) == set(ids)
        for fid in ids:
            a, b = before[fid], after[fid]
            fields = ("content", "detail", "topic", "type", "agent_id", "tags", "confidence", "pinned", "metadata", "context", "created_at")
            assert {f: getattr(b, f) for f in fields} == {f: getattr(a, f) for f in fields}, fid
        assert after[ids[0]].detail == long_text
        graph = target.service.graph_explore(GraphExploreInput(startId=ids[0], agentId="alice"), CallContext())
        assert [(e.from_, e.to, e.relation) for e in graph.edges] == [(ids[0], ids[1], RelationType.RESOLVED_BY)]
        assert _graph_of(target.service) == graph_before
    finally:
        target.close()


def _graph_of(service: MemoryService) -> dict[str, Any]:
    """Each agent's entity graph by name: entities with their fields, relations, associations."""
    out: dict[str, Any] = {}
    for agent in ("alice", "bob"):
        ctx = CallContext(agent_id=agent)
        entities = service.entities.list_entities(None, None, 100, 0, ctx).items
        relations = service.entities.list_relations(None, None, 100, 0, ctx).items
        memories = {e.name: [m.id for m in service.entities.entity_memories(e.id, 100, 0, ctx).items] for e in entities}
        out[agent] = {
            "entities": sorted((e.name, e.entity_type, e.description, json.dumps(e.metadata)) for e in entities),
            "relations": sorted((r.source, r.target, r.relation_type, r.strength, r.confidence, r.context) for r in relations),
            "memories": memories,
        }
    assert out["alice"]["relations"] and out["bob"]["memories"]["Tabs"]  # the fixture really has a graph
    return out
