"""Seed 004 §5.1 `forget`: soft (hidden, restorable, purged after the retention) and hard (the right
to erasure, with a receipt that `verify_erasure` checks). docs/erasure.md.

The hard-erasure tests plant a random marker word, make every copy of it Memento keeps (content,
an amended version, the full-text and keyword indexes, vectors and their saved index files,
access statistics, Redis keys, the live-event ring), erase, and then read the raw bytes of the
SQLite file, its WAL and shared memory and the vector index files, or every PostgreSQL table as
text and every Redis key and value, for the marker. Each asserts the marker was there before.
"""

from __future__ import annotations

import io
import json
import secrets
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import Clock, StoreEnv
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_helpers import SERVE, TIMEOUT_S, assert_backend, data, error_of, server_env, start_http_server

from memento.app import App, build_app
from memento.cli import export as exporting
from memento.embeddings.hashing import HashEmbedder
from memento.errors import Forbidden, InvalidArgument, NotFound
from memento.graph_inputs import ConsolidateMemoriesInput, SearchFilters, StoreMemoryInput
from memento.importers import import_path
from memento.mcp.events import MemoryEventStore, StoredEventEraser
from memento.models import (
    AgentScope,
    AmendInput,
    CallContext,
    ConsolidateInput,
    ContextInput,
    ForgetInput,
    ForgetMode,
    LinkInput,
    RecallInput,
    RecordInput,
    RememberInput,
    RestoreInput,
    VerifyErasureInput,
)
from memento.results import ErasureReceipt
from memento.service import MemoryService
from memento.settings import Settings
from memento.storage.protocol import SearchFilter

HARD = ForgetMode.HARD


def marker() -> str:
    """A word no analyser changes (no stem, no stop word) and no other test writes."""
    return "zq" + secrets.token_hex(6) + "x"


def remember(service: MemoryService, ctx: CallContext, content: str, **fields: Any) -> str:
    return service.remember(
        RememberInput(content=content, topic=fields.pop("topic", "notes"), type=fields.pop("type", "fact"), **fields), ctx
    ).id


def recalled(service: MemoryService, ctx: CallContext, text: str) -> list[str]:
    return [f.id for f in service.recall(RecallInput(text=text, limit=50), ctx).fragments]


# ---------------------------------------------------------------- soft


@pytest.mark.backends("sqlite", "postgres")
def test_a_soft_forget_hides_the_memory_from_every_read_and_restore_brings_it_back(
    service: MemoryService, ctx: CallContext, clock: Clock
) -> None:
    word = marker()
    fid = remember(service, ctx, f"The deploy key of {word} rotates monthly", type="preference")
    assert fid in recalled(service, ctx, word)
    forgot = service.forget(ForgetInput(id=fid, force=True), ctx)
    assert (forgot.mode, forgot.deleted, forgot.restorable_until) == ("soft", [fid], (clock.now + timedelta(days=30)).isoformat())
    assert fid not in recalled(service, ctx, word)
    assert fid not in json.dumps(service.context(ContextInput(types=["preference"]), ctx).dump())
    assert service.store.get_many(AgentScope(), [fid]) == []
    with pytest.raises(NotFound):
        service.entities.get_memory(fid, ctx)
    assert fid not in [m.id for m in service.entities.list_memories(SearchFilters(), 50, 0, ctx).items]
    with pytest.raises(NotFound):  # forgotten once is forgotten: a second soft forget finds nothing
        service.forget(ForgetInput(id=fid, force=True), ctx)
    hidden = service.store.vector_search(AgentScope("system"), np.asarray(service.vectors.query(f"deploy key {word}")), SearchFilter(), 50)
    assert fid not in [h.id for h in hidden]  # no place among the nearest neighbours while hidden
    back = service.restore(RestoreInput(id=fid), ctx)
    assert back.id == fid and back.fragment.content.startswith("The deploy key")
    assert service.settle() and service.store.get_many(AgentScope("system"), [fid])[0].has_embedding  # embedded again
    assert fid in recalled(service, ctx, word)
    assert service.entities.get_memory(fid, ctx).id == fid
    with pytest.raises(NotFound):  # restoring a live memory
        service.restore(RestoreInput(id=fid), ctx)


def test_a_soft_forget_keeps_the_rules_of_forget(service: MemoryService, ctx: CallContext) -> None:
    fid = remember(service, ctx, "A permanent preference", type="preference")
    with pytest.raises(Forbidden, match="force"):
        service.forget(ForgetInput(id=fid), ctx)
    with pytest.raises(Forbidden, match="force"):
        service.forget(ForgetInput(id=fid, mode=HARD), ctx)
    assert service.store.get_many(AgentScope(), [fid])  # nothing changed
    with pytest.raises(InvalidArgument):
        service.forget(ForgetInput(mode=HARD), ctx)
    with pytest.raises(NotFound):
        service.forget(ForgetInput(id="frag-0000000000000000", mode=HARD), ctx)
    assert service.forget(ForgetInput(topic="no-such-topic", mode=HARD), ctx).count == 0


@pytest.mark.backends("sqlite", "postgres")
def test_consolidation_purges_what_was_soft_forgotten_longer_than_the_retention(
    service: MemoryService, ctx: CallContext, clock: Clock, app: App
) -> None:
    old = remember(service, ctx, "forgotten long ago")
    recent = remember(service, ctx, "forgotten yesterday")
    kept = remember(service, ctx, "never forgotten")
    service.forget(ForgetInput(id=old), ctx)
    clock.now += timedelta(days=29)
    service.forget(ForgetInput(id=recent), ctx)
    clock.now += timedelta(days=2)  # old: 31 days, recent: 2 days
    result = service.memory_consolidate(ConsolidateInput(), ctx)
    assert result.forgotten_purged == 1
    assert app.store.restore(AgentScope("system"), [old]) == []  # gone for good, not merely hidden
    with pytest.raises(NotFound):
        service.restore(RestoreInput(id=old), ctx)
    assert service.restore(RestoreInput(id=recent), ctx).id == recent
    assert service.store.get_many(AgentScope(), [kept])


def test_a_retention_of_zero_keeps_soft_forgotten_memories_until_restored(tmp_path: Path, clock: Clock) -> None:
    settings = Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'm.db'}", EMBEDDING_PROVIDER="hash", MEMENTO_FORGET_RETENTION_DAYS=0)
    app = build_app(settings, embedder=HashEmbedder(64), clock=clock)
    try:
        ctx = CallContext()
        fid = remember(app.service, ctx, "kept for ever while forgotten")
        assert app.service.forget(ForgetInput(id=fid), ctx).restorable_until is None
        clock.now += timedelta(days=3650)
        assert app.service.memory_consolidate(ConsolidateInput(), ctx).forgotten_purged == 0
        assert app.service.restore(RestoreInput(id=fid), ctx).id == fid
    finally:
        app.close()


# ---------------------------------------------------------------- hard, on SQLite: the bytes on disk


@pytest.fixture
def file_app(tmp_path: Path, clock: Clock) -> Iterator[App]:
    """A SQLite store with an embedder, so vectors and their saved index files exist."""
    settings = Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'memento.db'}", EMBEDDING_PROVIDER="hash")
    built = build_app(settings, embedder=HashEmbedder(256), clock=clock)
    yield built
    built.close()


def files_holding(folder: Path, needles: list[bytes]) -> dict[str, int]:
    """Every file under `folder` (database, -wal, -shm, vector index files) with a needle in its bytes."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            raw = path.read_bytes()
            hits = sum(raw.count(n) for n in needles)
            if hits:
                found[path.name] = hits
    return found


def fill(service: MemoryService, ctx: CallContext, n: int) -> None:
    for i in range(n):
        remember(service, ctx, f"Unrelated note {i} about {secrets.token_hex(6)} and its neighbours", topic="filler")


def test_a_hard_forget_leaves_no_byte_of_the_text_in_the_database_file_wal_or_vector_files(
    file_app: App, tmp_path: Path, ctx: CallContext
) -> None:
    service, word = file_app.service, marker()
    fill(service, ctx, 120)
    fid = remember(service, ctx, f"The customer's pager code is {word} until further notice", keywords=[word, "pager"])
    fill(service, ctx, 120)
    service.amend(AmendInput(id=fid, content=f"The customer's pager code changed; the old one was {word}"), ctx)  # a version
    service.amend(AmendInput(id=fid, content=f"Pager code {word} retired"), ctx)
    assert service.settle()  # every vector stored
    assert fid in recalled(service, ctx, word)  # access statistics, the vector index loaded
    file_app.store.flush_access()
    vector = np.asarray(service.vectors.passage(f"Pager code {word} retired"), dtype=np.float32)
    file_app.store.vectors.save()  # type: ignore[attr-defined]
    needles = [word.encode()]
    assert files_holding(tmp_path, needles)  # it was there
    # the whole vector, as the index may store it: a 64-byte prefix of a sparse hash vector can be all zeros
    vector_bytes = [vector.astype(np.float16).tobytes(), vector.tobytes()]
    assert all(raw.strip(b"\0") for raw in vector_bytes)
    assert files_holding(tmp_path / "memento.db.vectors", vector_bytes)

    result = service.forget(ForgetInput(id=fid, mode=HARD), ctx)

    receipt = result.receipt
    assert receipt is not None and result.mode == "hard" and result.deleted == receipt.memory_ids == [fid]
    assert files_holding(tmp_path, needles) == {}
    assert files_holding(tmp_path / "memento.db.vectors", vector_bytes) == {}
    locations = receipt.locations
    assert (locations["row"], locations["versions"], locations["vectors"], locations["walCheckpoint"]) == (1, 2, 1, 1)
    assert locations["fullText"] >= 2 and locations["ftsOptimized"] == 1 and locations["vectorIndexFiles"] == 1
    assert fid not in recalled(service, ctx, word)
    assert service.verify_erasure(VerifyErasureInput(receipt=receipt.dump()), ctx).verified
    file_app.close()  # closing saves the vector index and optimises the database: still nothing
    assert files_holding(tmp_path, needles) == {}
    assert files_holding(tmp_path / "memento.db.vectors", vector_bytes) == {}


def test_a_database_written_without_secure_delete_is_vacuumed_by_its_first_hard_forget(
    tmp_path: Path, clock: Clock, ctx: CallContext
) -> None:
    settings = Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'memento.db'}", EMBEDDING_PROVIDER="hash")
    app = build_app(settings, embedder=None, clock=clock)
    word = marker()
    try:
        fill(app.service, ctx, 60)
        fid = remember(app.service, ctx, f"Old text {word} from before the upgrade")
        app.service.amend(AmendInput(id=fid, content="Rewritten without the word"), ctx)
        with app.store.db.exclusive() as conn:  # type: ignore[attr-defined]
            conn.execute("PRAGMA secure_delete = OFF")  # as versions before 0009 wrote
        app.service.amend(AmendInput(id=fid, content=f"Again {word}"), ctx)
        app.service.amend(AmendInput(id=fid, content="And gone again"), ctx)
        with app.store.db.tx() as conn:  # type: ignore[attr-defined]
            conn.execute("INSERT INTO erasure_state (name, value) VALUES ('vacuum_pending', '1')")  # what migration 0009 records
            conn.execute("PRAGMA secure_delete = ON")
        result = app.service.forget(ForgetInput(id=fid, mode=HARD), ctx)
        assert result.receipt is not None and result.receipt.locations["vacuum"] == 1
        assert files_holding(tmp_path, [word.encode()]) == {}
        second = app.service.forget(ForgetInput(id=remember(app.service, ctx, "another"), mode=HARD), ctx)
        assert second.receipt is not None and second.receipt.locations["vacuum"] == 0  # once
    finally:
        app.close()


def test_text_merged_into_another_memory_is_erased_with_the_absorbed_id(
    file_app: App, tmp_path: Path, ctx: CallContext, clock: Clock
) -> None:
    service, word = file_app.service, marker()
    primary = service.entities.store_memory(StoreMemoryInput(content=f"Team lunch is on Fridays at noon {word}"), ctx).memory
    clock.now += timedelta(minutes=1)
    absorbed = remember(service, ctx, f"Team lunch is on Fridays at noon {word}!", type="observation")
    done = service.entities.consolidate_memories(ConsolidateMemoriesInput(similarity_threshold=0.85), ctx)
    assert done.memories_merged == 1  # `absorbed` is gone; its text is in the primary's version trail
    service.amend(AmendInput(id=primary.id, content="Team lunch moved to Thursdays"), ctx)
    with pytest.raises(NotFound):
        service.forget(ForgetInput(id=absorbed), ctx)  # soft: nothing to hide
    result = service.forget(ForgetInput(id=absorbed, mode=HARD), ctx)
    receipt = result.receipt
    assert receipt is not None and receipt.memory_ids == [absorbed]
    assert [(d.id, d.action) for d in receipt.derived] == [(primary.id, "merged text removed")]
    notes = [v.get("note") for v in file_app.store.versions(AgentScope(), primary.id)]
    assert f"merged:{absorbed}" not in " ".join(str(n) for n in notes)
    assert service.verify_erasure(VerifyErasureInput(receiptId=receipt.receipt_id), ctx).verified
    # the primary's own text (and its own earlier version) is its own: still there until erased too
    both = service.forget(ForgetInput(id=primary.id, mode=HARD, force=True), ctx)
    assert both.receipt is not None and files_holding(tmp_path, [word.encode()]) == {}


@pytest.mark.backends("sqlite", "postgres")
def test_text_merged_twice_is_erased_from_the_last_survivor(service: MemoryService, app: App, ctx: CallContext) -> None:
    """X merged into Y, then Y into Z: Z's trail holds X's text as `from Y: merged:X`; erasing X
    removes it there too (and the receipt's verification finds nothing left)."""
    word = marker()
    x = remember(service, ctx, f"The build cache lives on volume {word}")
    y = remember(service, ctx, "The build cache lives on the shared volume")
    z = remember(service, ctx, "Build caches live on the shared volume")
    service.entities.absorb_memory(None, x, y, ctx)
    service.entities.absorb_memory(None, y, z, ctx)
    trail = app.store.versions(AgentScope(), z)
    assert any(word in str(v["content"]) and f"merged:{x}" in str(v["note"]) for v in trail)  # the premise
    receipt = service.forget(ForgetInput(id=x, mode=HARD), ctx).receipt
    assert receipt is not None and receipt.memory_ids == [x]
    assert (z, "merged text removed") in [(d.id, d.action) for d in receipt.derived]
    assert not any(word in str(v["content"]) or x in str(v["note"]) for v in app.store.versions(AgentScope(), z))
    assert any(f"merged:{y}" in str(v["note"]) for v in app.store.versions(AgentScope(), z))  # Y's own text is not X's
    assert service.verify_erasure(VerifyErasureInput(receiptId=receipt.receipt_id), ctx).verified


def test_memories_derived_from_an_erased_one_lose_the_reference_and_are_listed(service: MemoryService, ctx: CallContext) -> None:
    original = remember(service, ctx, "The VPN gateway is vpn-old.example")
    successor = service.amend(AmendInput(id=original, content="The VPN gateway is vpn-new.example", supersedes=True), ctx).id
    traced = remember(service, ctx, "Summary of the gateway move", record=RecordInput(originTrace={"from": [original, "chat"], "turn": 4}))
    tagged = remember(service, ctx, "Gateway audit", record=RecordInput(metadata={"about": original, "ticket": "NET-7"}))
    receipt = service.forget(ForgetInput(id=original, mode=HARD), ctx).receipt
    assert receipt is not None
    assert sorted((d.id, d.action) for d in receipt.derived) == sorted(
        [(successor, "reference removed"), (traced, "reference removed"), (tagged, "reference removed")]
    )
    views = {f.id: f for f in service.store.get_many(AgentScope(), [successor, traced, tagged])}
    assert views[successor].source is None and views[successor].content == "The VPN gateway is vpn-new.example"
    assert views[traced].origin_trace == {"from": ["chat"], "turn": 4}
    assert views[tagged].metadata == {"ticket": "NET-7"}
    assert original not in json.dumps([service.entities.get_memory(i, ctx).model_dump(mode="json") for i in views])


def test_a_hard_forget_by_topic_erases_every_memory_of_it_soft_forgotten_ones_included(service: MemoryService, ctx: CallContext) -> None:
    ids = [remember(service, ctx, f"scratch item {i}", topic="scratch") for i in range(3)]
    service.forget(ForgetInput(id=ids[0]), ctx)  # soft first: a hard forget still finds it
    receipt = service.forget(ForgetInput(topic="scratch", mode=HARD, force=True), ctx).receipt
    assert receipt is not None and sorted(receipt.memory_ids) == sorted(ids) and receipt.locations["row"] == 3
    with pytest.raises(NotFound):
        service.restore(RestoreInput(id=ids[0]), ctx)


# ---------------------------------------------------------------- the receipt


def test_the_receipt_verifies_and_an_altered_one_does_not(service: MemoryService, ctx: CallContext) -> None:
    fid = remember(service, ctx, "Alice's birthday is 4 May", keywords=["alice", "birthday"])
    receipt = service.forget(ForgetInput(id=fid, mode=HARD), ctx).receipt
    assert receipt is not None
    body = receipt.dump()
    assert set(body) == {"receiptId", "agentId", "erasedAt", "memoryIds", "derived", "locations", "backend", "contentDigest", "digest"}
    assert body["agentId"] == "default" and body["backend"] == "sqlite" and body["contentDigest"].startswith("sha256:")
    assert "birthday" not in json.dumps(body)  # no text in the receipt
    good = service.verify_erasure(VerifyErasureInput(receipt=body), ctx)
    assert good.verified and [c.name for c in good.checks] == [
        "digest",
        "onFile",
        "rows",
        "versions",
        "fullText",
        "vectors",
        "contentHashes",
    ]
    assert all(c.ok for c in good.checks)
    changes: list[dict[str, Any]] = [
        {"erasedAt": "2020-01-01T00:00:00+00:00"},
        {"memoryIds": []},
        {"locations": {**body["locations"], "row": 0}},
    ]
    for change in changes:
        altered = service.verify_erasure(VerifyErasureInput(receipt={**body, **change}), ctx)
        assert not altered.verified and {c.name: c.ok for c in altered.checks} == {"digest": False, "onFile": False}
    from memento.erasure import receipt_digest

    forged = {**body, "memoryIds": []}
    forged["digest"] = receipt_digest(forged)  # a consistent forgery is still not the one on file
    checks = {c.name: c.ok for c in service.verify_erasure(VerifyErasureInput(receipt=forged), ctx).checks}
    assert checks == {"digest": True, "onFile": False}
    with pytest.raises(InvalidArgument):
        service.verify_erasure(VerifyErasureInput(), ctx)
    with pytest.raises(InvalidArgument):
        service.verify_erasure(VerifyErasureInput(receipt={"no": "id"}), ctx)
    with pytest.raises(NotFound):
        service.verify_erasure(VerifyErasureInput(receiptId="erasure-0000000000000000"), ctx)


def test_verification_fails_when_the_text_comes_back(service: MemoryService, ctx: CallContext) -> None:
    fid = remember(service, ctx, "The vault PIN is 8841")
    receipt = service.forget(ForgetInput(id=fid, mode=HARD), ctx).receipt
    assert receipt is not None
    remember(service, ctx, "The vault PIN is 8841")  # stored again by hand: the erasure no longer holds
    result = service.verify_erasure(VerifyErasureInput(receipt=receipt.dump()), ctx)
    assert not result.verified and {c.name for c in result.checks if not c.ok} == {"contentHashes"}


def test_another_agent_cannot_verify_restore_or_erase(service: MemoryService) -> None:
    a, b = CallContext(agent_id="agent-a"), CallContext(agent_id="agent-b")
    soft = remember(service, a, "A's soft-forgotten note")
    service.forget(ForgetInput(id=soft), a)
    hard = remember(service, a, "A's erased note")
    receipt = service.forget(ForgetInput(id=hard, mode=HARD), a).receipt
    assert receipt is not None
    live = remember(service, a, "A's live note")
    with pytest.raises(NotFound):
        service.restore(RestoreInput(id=soft), b)
    with pytest.raises(NotFound):
        service.forget(ForgetInput(id=live, mode=HARD, force=True), b)
    with pytest.raises(NotFound):
        service.verify_erasure(VerifyErasureInput(receiptId=receipt.receipt_id), b)
    seen = service.verify_erasure(VerifyErasureInput(receipt=receipt.dump()), b)
    assert not seen.verified and [c.name for c in seen.checks] == ["digest", "onFile"]
    with pytest.raises(Forbidden):
        service.restore(RestoreInput(id=soft, agentId="agent-a"), b)
    assert service.restore(RestoreInput(id=soft), a).id == soft
    assert service.verify_erasure(VerifyErasureInput(receipt=receipt.dump()), a).verified


def test_an_import_skips_a_memory_erased_before(service: MemoryService, ctx: CallContext, tmp_path: Path, app: App) -> None:
    kept = remember(service, ctx, "Keep this one")
    gone = remember(service, ctx, "Erase this one")
    service.link(LinkInput(fromId=kept, toId=gone), ctx)
    out = io.StringIO()
    exporting.export(app.store, out)
    export = tmp_path / "export.jsonl"
    export.write_text(out.getvalue(), encoding="utf-8")
    service.forget(ForgetInput(id=gone, mode=HARD), ctx)
    report = import_path(service, export)
    assert report.stored == 0 and report.already_known == 1
    reasons = [s.reason for s in report.skipped]
    assert any("erased before" in r for r in reasons) and any("erased before" in r and "link" in r for r in reasons)
    assert service.store.get_many(AgentScope(), [gone]) == []
    assert gone not in recalled(service, ctx, "Erase this one")


# ---------------------------------------------------------------- hard, on PostgreSQL and Redis


def postgres_text(dsn: str, word: str) -> dict[str, int]:
    """Every table of schema agent_memory read row by row as text (as the superuser, whom
    row-level security does not bind): the tables whose rows hold `word`."""
    import psycopg

    found = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'agent_memory'")]
        assert {"fragments", "fragment_versions", "fragment_terms", "fragment_keywords", "erasure_receipts"} <= set(tables)
        for table in tables:
            row = conn.execute(f"SELECT COUNT(*) FROM agent_memory.{table} t WHERE strpos(t::text, %s) > 0", (word,)).fetchone()
            if row and row[0]:
                found[table] = int(row[0])
    return found


def redis_text(port: int, word: str) -> list[str]:
    """Every Redis key whose name or value holds `word` (SCAN, then each value by its type)."""
    import redis

    found = []
    with redis.Redis(port=port, decode_responses=True) as client:
        for name in client.scan_iter(count=500):
            value = _redis_value(client, name)
            if word in name or word in json.dumps(value, default=str):
                found.append(name)
    return found


def _redis_value(client: Any, name: str) -> Any:
    kind = client.type(name)
    if kind == "string":
        return client.get(name)
    if kind == "set":
        return sorted(client.smembers(name))
    if kind == "list":
        return client.lrange(name, 0, -1)
    if kind == "hash":
        return client.hgetall(name)
    if kind == "zset":
        return client.zrange(name, 0, -1)
    if kind == "stream":
        return client.xrange(name)
    return None


@pytest.mark.backends("postgres", "postgres+redis")
def test_a_hard_forget_on_postgresql_leaves_the_text_in_no_table_and_no_redis_key(
    app: App, ctx: CallContext, request: pytest.FixtureRequest
) -> None:
    from memento.rest.events import EventHub

    postgres = request.getfixturevalue("postgres_server")
    hub = None
    if app.redis is not None:  # the REST face's live events, with their Redis list, as the web app wires them
        hub = EventHub(app.store, redis=app.redis.blocking, bus=app.bus)
        app.service.add_listener(hub.on_change)
        app.service.erasure.add_participant(hub)
    service, word = app.service, marker()
    fid = remember(service, ctx, f"Her locker combination is {word}", keywords=[word, "locker"])
    service.amend(AmendInput(id=fid, content=f"Her locker combination {word} changed"), ctx)
    other = remember(service, ctx, "Lockers are opened by facilities on request", keywords=["locker"])
    assert fid in recalled(service, ctx, word)
    app.store.flush_access()
    assert {"fragments", "fragment_versions", "fragment_keywords"} <= set(postgres_text(postgres.superuser_dsn, word))
    if hub is not None:
        assert app.keyword_index is not None and app.keyword_index.wait_ready()
        assert redis_text(request.getfixturevalue("shared_redis").port, word)  # the L1 key and the event list

    receipt = service.forget(ForgetInput(id=fid, mode=HARD), ctx).receipt

    assert receipt is not None and receipt.backend == "postgres"
    assert postgres_text(postgres.superuser_dsn, word) == {}
    assert receipt.locations["vacuumed"] == 9  # PostgreSQL 17+: the application role holds MAINTAIN (memory_linkages, fragment_tags, ...)
    assert receipt.locations["versions"] == 1 and receipt.locations["row"] == 1
    checks = {c.name: c.ok for c in service.verify_erasure(VerifyErasureInput(receipt=receipt.dump()), ctx).checks}
    assert all(checks.values()), checks
    if hub is not None:
        assert redis_text(request.getfixturevalue("shared_redis").port, word) == []
        assert receipt.locations["redis"] >= 2 and receipt.locations["events"] >= 1
        assert {"redis", "events"} <= set(checks)
        assert [hit for hit in recalled(service, ctx, "locker") if hit == fid] == []
    assert other in recalled(service, ctx, "locker")


# ---------------------------------------------------------------- the receipt model


def test_the_receipt_model_is_the_wire_form() -> None:
    schema = ErasureReceipt.json_schema()
    assert set(schema["required"]) >= {"receiptId", "agentId", "erasedAt", "memoryIds", "locations", "contentDigest", "digest"}


# ---------------------------------------------------------------- the official MCP client, over stdio and HTTP


async def exercise_forgetting(client: Client, redis_port: int | None = None) -> None:
    """forget (both modes), restore and verify_erasure as a client sees them, schemas included;
    with `redis_port`, every Redis key and value is searched for the text before and after."""
    listed = {t.name: t.input_schema for t in (await client.list_tools()).tools}
    mode = listed["forget"]["properties"]["mode"]
    assert (mode["enum"], mode["default"], mode["type"]) == (["soft", "hard"], "soft", "string")
    assert listed["restore"]["required"] == ["id"] and set(listed["restore"]["properties"]) == {"id", "agentId"}
    assert set(listed["verify_erasure"]["properties"]) == {"receipt", "receiptId", "agentId"}
    assert listed["verify_erasure"]["properties"]["receipt"]["type"] == "object"
    for name in ("forget", "restore", "verify_erasure"):
        assert all(p.get("description") for p in listed[name]["properties"].values()), name
    word = marker()
    fid = data(await client.call_tool("remember", {"content": f"Door code {word}", "topic": "office", "type": "fact"}))["id"]
    soft = data(await client.call_tool("forget", {"id": fid}))
    assert soft["mode"] == "soft" and soft["deleted"] == [fid] and "restorableUntil" in soft
    assert data(await client.call_tool("recall", {"keywords": [word]}))["count"] == 0
    assert data(await client.call_tool("restore", {"id": fid}))["id"] == fid
    assert data(await client.call_tool("recall", {"keywords": [word]}))["count"] == 1
    assert word in json.dumps(data(await client.call_tool("recall", {"text": f"door code {word}"})))
    if redis_port is not None:
        assert redis_text(redis_port, word)  # the keyword index, the live events, the stored stream events
    hard = data(await client.call_tool("forget", {"id": fid, "mode": "hard"}))
    receipt = hard["receipt"]
    assert hard["mode"] == "hard" and receipt["memoryIds"] == [fid] and receipt["digest"].startswith("sha256:")
    if redis_port is not None:
        assert redis_text(redis_port, word) == []
        assert receipt["locations"]["redis"] >= 1 and receipt["locations"]["events"] >= 1
    verdict = data(await client.call_tool("verify_erasure", {"receipt": receipt}))
    assert verdict["verified"] is True and {c["name"] for c in verdict["checks"]} >= {"digest", "onFile", "rows", "fullText"}
    assert data(await client.call_tool("verify_erasure", {"receiptId": receipt["receiptId"]}))["verified"] is True
    assert error_of(await client.call_tool("restore", {"id": fid}))[0] == "not_found"
    assert error_of(await client.call_tool("forget", {"id": fid, "mode": "sometimes"}))[0] == "invalid_argument"
    assert error_of(await client.call_tool("verify_erasure", {}))[0] == "invalid_argument"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.slow
async def test_forget_restore_and_verify_erasure_over_stdio(tmp_path: Path) -> None:
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--transport", "stdio"], env=server_env(tmp_path / "m.db"))
    async with Client(params, read_timeout_seconds=TIMEOUT_S) as client:
        await exercise_forgetting(client)


@pytest.mark.anyio
@pytest.mark.slow
@pytest.mark.backends("sqlite", "postgres+redis")
async def test_forget_restore_and_verify_erasure_over_streamable_http(
    tmp_path: Path, store_env: StoreEnv, backend: str, request: pytest.FixtureRequest
) -> None:
    server = start_http_server(server_env(store_env(tmp_path)), tmp_path / "server.log")
    try:
        assert_backend(server, backend)
        port = request.getfixturevalue("shared_redis").port if backend.endswith("+redis") else None
        async with Client(server.mcp, read_timeout_seconds=TIMEOUT_S) as client:
            await exercise_forgetting(client, port)
    finally:
        server.stop()


def test_stored_stream_events_quoting_an_erased_text_are_dropped() -> None:
    store = MemoryEventStore()
    text = 'He said "open sesame" at the door'
    quoting = {"result": {"content": [{"type": "text", "text": json.dumps({"content": text})}]}}
    store.append("s1", "post-1", quoting)
    store.append("s1", "post-1", {"result": {"content": [{"type": "text", "text": "unrelated"}]}})
    store.append("s2", "post-2", {"result": {"text": text}})
    eraser = StoredEventEraser(store)
    assert eraser.erase(["frag-x"], [text]) == 2
    assert [e.message for e in store.after("s1", "post-1", None)] == [{"result": {"content": [{"type": "text", "text": "unrelated"}]}}]
    assert store.after("s2", "post-2", None) == [] and eraser.residue(["frag-x"]) is None
