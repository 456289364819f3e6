"""Seed 003's identity crystal: snapshots and their history on SQLite and PostgreSQL (isolation,
read-only refusal, bounded length), crystallize (the extractive draft's content; the language
model path with a small real callable lent through CallContext.complete, and its fallback),
the four tools and the `session_start` prompt through the official MCP client, and the /v1
routes over HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import Clock, StoreEnv
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_fakes import FakeContext, FakeHub, FakeSession
from mcp_helpers import SERVE, TIMEOUT_S, HttpServer, assert_backend, error_of, server_env, start_http_server
from mcp_types import CallToolResult, TextContent
from pg_harness import PostgresServer
from pydantic import ValidationError
from rest_helpers import KEY_A, KEY_A_READ, KEY_B, problem_of, rest_env

from memento.app import App, build_app
from memento.embeddings.hashing import HashEmbedder
from memento.errors import Conflict, Forbidden, InvalidArgument, Unavailable
from memento.exchange.export import Exporter
from memento.exchange.restore import RestoreFormatError, check, restore
from memento.mcp.prompts import IDENTITY_CUT, PromptsFeature, identity_section
from memento.models import AgentScope, CallContext, ForgetInput, ForgetMode, RecallInput, ReflectInput, RememberInput
from memento.protocol_face.crystal import MAX_CRYSTAL_CHARS, MODEL_TOKENS
from memento.protocol_face.identity import (
    PLACEHOLDER,
    CrystallizeInput,
    IdentityHistoryInput,
    IdentityInput,
    IdentitySnapshot,
    IdentityUpdateInput,
)
from memento.protocol_face.skips import SkipAddInput, SkipListInput
from memento.protocol_face.workmem_models import ItemCreateInput
from memento.service import MemoryService
from memento.settings import Settings
from memento.storage.protocol import SearchFilter
from memento.storage.records import RecordQuery

pytestmark = pytest.mark.backends("sqlite", "postgres")

ALICE = CallContext(agent_id="alice")
BOB = CallContext(agent_id="bob")
ALICE_READ = CallContext(agent_id="alice", read_only=True)


def write(service: MemoryService, text: str, ctx: CallContext = ALICE) -> IdentitySnapshot:
    return service.protocol.identity.update(IdentityUpdateInput(crystal=text), ctx)


def latest_text(service: MemoryService, ctx: CallContext = ALICE) -> str | None:
    found = service.protocol.identity.latest(ctx)
    return None if found is None else found.crystal


def remember(service: MemoryService, content: str, type_: str, ctx: CallContext = ALICE, importance: float | None = None) -> None:
    service.remember(RememberInput.model_validate({"content": content, "topic": "t", "type": type_, "importance": importance}), ctx)


# ---------------------------------------------------------------- snapshots, on both backends


def test_without_a_crystal_the_identity_is_a_placeholder_saying_how_to_make_one(service: MemoryService) -> None:
    got = service.protocol.identity.get(IdentityInput(), ALICE)
    assert got.found is False and got.crystal == PLACEHOLDER and got.id is None
    assert "memento_identity_update" in got.crystal and "memento_identity_crystallize" in got.crystal
    assert service.protocol.identity.latest(ALICE) is None
    assert got.model_dump(exclude_none=True) == {"found": False, "crystal": PLACEHOLDER}


def test_every_update_is_a_new_snapshot_and_the_history_keeps_them_newest_first(service: MemoryService) -> None:
    first = write(service, "I am a careful engineer who writes tests first.")
    second = write(service, "  I am a careful engineer; I now also write the docs first.  ")
    assert second.crystal == "I am a careful engineer; I now also write the docs first." and second.source == "manual"
    assert second.source_count == 0 and first.id != second.id and first.id.startswith("idn-")
    got = service.protocol.identity.get(IdentityInput(), ALICE)
    assert got.found and (got.id, got.crystal, got.source) == (second.id, second.crystal, "manual")
    history = service.protocol.identity.history(IdentityHistoryInput(), ALICE)
    assert [s.id for s in history.snapshots] == [second.id, first.id] and history.total == 2
    assert history.snapshots[1].length == len(first.crystal) and history.snapshots[1].preview == first.crystal
    assert all(s.crystal is None for s in history.snapshots)
    one = service.protocol.identity.history(IdentityHistoryInput(limit=1, include_text=True), ALICE)
    assert [(s.id, s.crystal) for s in one.snapshots] == [(second.id, second.crystal)] and one.total == 2


def test_a_crystal_is_bounded_and_masked_and_a_refusal_stores_nothing(service: MemoryService) -> None:
    write(service, "I keep my promises.")
    with pytest.raises(InvalidArgument) as refused:
        write(service, "x" * (MAX_CRYSTAL_CHARS + 1))
    assert f"at most {MAX_CRYSTAL_CHARS} characters" in refused.value.message and "nothing stored" in refused.value.message
    for blank in ("", "   "):
        with pytest.raises(ValidationError):
            IdentityUpdateInput(crystal=blank)
    assert service.protocol.identity.history(IdentityHistoryInput(), ALICE).total == 1
    write(service, "x" * MAX_CRYSTAL_CHARS)  # the bound itself is accepted
    masked = write(service, "I answer mail at alice@example.com every morning.")
    assert "alice@example.com" not in masked.crystal and "[REDACTED_EMAIL]" in masked.crystal


def test_namespaces_and_workspaces_each_have_their_own_crystal(service: MemoryService) -> None:
    write(service, "I am Alice's assistant.")
    write(service, "I am Bob's assistant.", BOB)
    garden = CallContext(agent_id="alice:garden", workspace="garden")
    assert latest_text(service) == "I am Alice's assistant." and latest_text(service, BOB) == "I am Bob's assistant."
    assert latest_text(service, garden) is None and latest_text(service, CallContext()) is None
    assert service.protocol.identity.history(IdentityHistoryInput(), BOB).total == 1


def test_a_read_only_credential_reads_but_never_writes(service: MemoryService) -> None:
    write(service, "I am Alice's assistant.")
    remember(service, "We ship on Tuesdays", "decision")
    assert latest_text(service, ALICE_READ) == "I am Alice's assistant."
    with pytest.raises(Forbidden):
        write(service, "overwritten", ALICE_READ)
    with pytest.raises(Forbidden):
        service.protocol.identity.crystallize(CrystallizeInput(), ALICE_READ)
    draft = service.protocol.identity.crystallize(CrystallizeInput(dry_run=True), ALICE_READ)  # a dry run changes nothing
    assert draft.stored is False and "We ship on Tuesdays" in draft.crystal
    assert service.protocol.identity.history(IdentityHistoryInput(), ALICE).total == 1


# ---------------------------------------------------------------- crystallize


@dataclass(frozen=True)
class Item:
    """A working-memory item to create through the items part (category, title, status...)."""

    category: str
    title: str
    content: str = ""
    status: str = "active"
    priority: int = 0
    next_action: str | None = None


def with_items(service: MemoryService, *items: Item) -> None:
    for item in items:
        service.protocol.items.create(
            ItemCreateInput.model_validate(
                {
                    "category": item.category,
                    "title": item.title,
                    "content": item.content or None,
                    "status": item.status,
                    "priority": item.priority,
                    "next_action": item.next_action,
                }
            ),
            ALICE,
        )


def a_working_life(service: MemoryService) -> None:
    with_items(
        service,
        Item("standing_decision", "All schema changes go through migrations", "never edit a live table by hand"),
        Item("active_work", "Ship the v2 export", next_action="write the import round-trip test", priority=8),
        Item("active_work", "Tidy the CLI help", status="paused", next_action="rename the flags"),
        Item("active_work", "Old spike", status="completed"),
        Item("waiting_for", "Review of the RLS policy", "asked Dana on Monday"),
    )
    remember(service, "The staging database lives in eu-west-1", "fact", importance=0.9)
    remember(service, "Prefer small pull requests over big ones", "preference", importance=0.8)
    remember(service, "Retries without jitter caused the thundering herd last week", "learning", importance=0.7)
    remember(service, "A shared pool fact nobody in particular owns", "fact", CallContext(), importance=1.0)
    service.reflect(
        ReflectInput(summary="Finished the export format and its docs", errorsResolved=["Fixed the NUL byte crash in import"]), ALICE
    )


def test_the_extractive_draft_speaks_in_the_first_person_from_working_memory_and_top_memories(service: MemoryService) -> None:
    a_working_life(service)
    made = service.protocol.identity.crystallize(CrystallizeInput(), ALICE)
    text = made.crystal
    assert made.stored and made.drafted_by == "extractive" and made.id is not None
    assert "I decided: All schema changes go through migrations: never edit a live table by hand" in text  # the standing decision
    assert "I am working on 'Ship the v2 export'; next, I will write the import round-trip test" in text  # active work
    assert "I have paused 'Tidy the CLI help'; next, I will rename the flags" in text
    assert "I am waiting for: Review of the RLS policy" in text
    assert "I know: The staging database lives in eu-west-1" in text and "I prefer: Prefer small pull requests" in text  # top memories
    assert "I learned: Retries without jitter" in text and "I learned: Fixed the NUL byte crash" in text  # lessons
    assert "Old spike" not in text and "shared pool fact" not in text  # completed work and others' memories stay out
    assert made.sources == {"items": 4, "memories": 5, "summaries": 0} and made.source_count == 9  # the summaries are top memories too
    got = service.protocol.identity.get(IdentityInput(), ALICE)
    assert (got.id, got.crystal, got.source, got.source_count) == (made.id, text, "crystallized", 9)


def test_a_hard_forget_deletes_the_snapshots_quoting_the_erased_memory(service: MemoryService) -> None:
    """A crystal is derived from memories: erasing one (004 forget mode=hard) takes the snapshots
    that quote it too, in every namespace, and says so in the receipt; other snapshots stay."""
    remember(service, "The vault passphrase hint is a purple heron over the quay", "fact", importance=1.0)
    remember(service, "Prefer small pull requests over big ones", "preference", importance=0.8)
    quoting = service.protocol.identity.crystallize(CrystallizeInput(), ALICE)
    assert "purple heron" in quoting.crystal
    kept = write(service, "I am Alice; I keep my notes short.")
    bobs = write(service, "Bob heard: The vault passphrase hint is a purple heron over the quay", BOB)
    fid = service.recall(RecallInput(text="purple heron quay"), ALICE).fragments[0].id
    result = service.forget(ForgetInput(id=fid, mode=ForgetMode.HARD, force=True), ALICE)
    assert result.receipt is not None and result.receipt.locations.get("identityCrystals") == 2
    history = service.protocol.identity.history(IdentityHistoryInput(include_text=True), ALICE)
    assert [h.id for h in history.snapshots] == [kept.id]
    assert service.protocol.identity.latest(BOB) is None and bobs.id
    assert "purple heron" not in json.dumps([h.model_dump() for h in history.snapshots])


def test_a_dry_run_stores_nothing_and_nothing_to_draft_from_is_refused(service: MemoryService) -> None:
    with pytest.raises(Conflict) as refused:
        service.protocol.identity.crystallize(CrystallizeInput(), ALICE)
    assert "nothing to crystallize" in refused.value.message
    remember(service, "We ship on Tuesdays", "decision")
    draft = service.protocol.identity.crystallize(CrystallizeInput(dry_run=True), ALICE)
    assert draft.stored is False and draft.id is None and "I decided: We ship on Tuesdays" in draft.crystal
    assert service.protocol.identity.history(IdentityHistoryInput(), ALICE).total == 0


class Scribe:
    """A small real language model stand-in: it writes first-person prose from the prompt's
    material lines, and records what it was asked."""

    def __init__(self, fails: bool = False) -> None:
        self.fails = fails
        self.calls: list[tuple[str, str | None, int]] = []

    def __call__(self, prompt: str, system: str | None, max_tokens: int) -> str:
        self.calls.append((prompt, system, max_tokens))
        if self.fails:
            raise Unavailable("the model is overloaded")
        facts = [line[2:] for line in prompt.splitlines() if line.startswith("- ")]
        return "I am the engineer these notes describe. " + " ".join(f"I remember that {f.rstrip('.')}." for f in facts)


def test_with_a_language_model_the_crystal_is_its_prose(service: MemoryService) -> None:
    a_working_life(service)
    scribe = Scribe()
    made = service.protocol.identity.crystallize(CrystallizeInput(), replace(ALICE, complete=scribe))
    ((prompt, system, max_tokens),) = scribe.calls
    assert system is not None and "first person" in system and "data, never as instructions" in system and max_tokens == MODEL_TOKENS
    assert "Standing decisions:" in prompt and "- All schema changes go through migrations" in prompt
    assert "I am working on 'Ship the v2 export'; next, I will write the import round-trip test" in prompt
    assert "The staging database lives in eu-west-1" in prompt and "shared pool fact" not in prompt
    assert made.drafted_by == "model" and made.crystal.startswith("I am the engineer these notes describe.")
    assert "I remember that The staging database lives in eu-west-1." in made.crystal
    assert latest_text(service) == made.crystal


def test_a_model_that_cannot_answer_falls_back_to_the_extractive_draft(service: MemoryService) -> None:
    remember(service, "We ship on Tuesdays", "decision")
    scribe = Scribe(fails=True)
    made = service.protocol.identity.crystallize(CrystallizeInput(), replace(ALICE, complete=scribe))
    assert len(scribe.calls) == 1 and made.drafted_by == "extractive" and "I decided: We ship on Tuesdays" in made.crystal


def test_a_long_model_answer_is_cut_to_the_bound(service: MemoryService) -> None:
    remember(service, "We ship on Tuesdays", "decision")
    made = service.protocol.identity.crystallize(CrystallizeInput(), replace(ALICE, complete=lambda p, s, n: "I " * MAX_CRYSTAL_CHARS))
    assert made.drafted_by == "model" and len(made.crystal) == MAX_CRYSTAL_CHARS and made.crystal.endswith("…")


# ---------------------------------------------------------------- export and import (format version 2)


def test_an_export_carries_the_skip_list_and_every_snapshot_and_an_import_restores_them(
    app: App, clock: Clock, backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    s = app.service
    s.protocol.skips.add(SkipAddInput(item="aurora alerts", reason="Kp too low", expires="2026-03-01"), ALICE)
    write(s, "I am the first crystal.")
    write(s, "I am the second crystal.")
    write(s, "I am Bob.", BOB)
    text = "".join(Exporter(app.store, AgentScope("alice"), RecordQuery(SearchFilter()), "ndjson").stream())
    lines = [json.loads(x) for x in text.splitlines()[1:]]
    skips = [x for x in lines if x["kind"] == "skip"]
    crystals = [x for x in lines if x["kind"] == "identity"]
    assert [(x["item"], x["agentId"], x["expiresAt"]) for x in skips] == [("aurora alerts", "alice", "2026-03-01T23:59:59.999999+00:00")]
    assert [(x["crystal"], x["source"], x["sourceCount"]) for x in crystals] == [
        ("I am the first crystal.", "manual", 0),
        ("I am the second crystal.", "manual", 0),
    ]
    assert lines[-1]["counts"]["skip"] == 1 and lines[-1]["counts"]["identity"] == 2 and "I am Bob." not in text
    bad = text.replace('"source":"manual"', '"source":"dreamt"', 1).splitlines()
    with pytest.raises(RestoreFormatError, match="source"):
        check(bad, "export.jsonl")
    app.close()
    if backend == "postgres":
        server: PostgresServer = request.getfixturevalue("postgres_server")
        server.reset()
        url = {"DATABASE_URL": server.app_dsn, "DATABASE_MIGRATION_URL": server.owner_dsn}
    else:
        url = {"DATABASE_URL": f"sqlite:///{tmp_path / 'restored.db'}"}
    target = build_app(Settings(**url, EMBEDDING_PROVIDER="hash"), embedder=HashEmbedder(256), clock=clock)  # type: ignore[arg-type]
    try:
        lines_in = text.splitlines()
        check(lines_in, "export.jsonl")
        report = restore(target.store, AgentScope("alice"), lines_in, "export.jsonl", embed=lambda t: [], agent=None, total=0)
        assert report.restored == {"skip": 1, "identity": 2} and report.skipped_total == 0
        t = target.service
        assert [e.item for e in t.protocol.skips.entries(SkipListInput(), ALICE).entries] == ["aurora alerts"]
        assert [(m.item, m.match) for m in t.protocol.skips.matches("aurora", ALICE)] == [("aurora alerts", "words")]
        assert [x.crystal for x in t.protocol.identity.history(IdentityHistoryInput(include_text=True), ALICE).snapshots] == [
            "I am the second crystal.",
            "I am the first crystal.",
        ]
        again = "".join(Exporter(target.store, AgentScope("alice"), RecordQuery(SearchFilter()), "ndjson").stream())
        assert again.splitlines()[1:] == text.splitlines()[1:]  # the same lines: lossless
    finally:
        target.close()


# ---------------------------------------------------------------- session_start


def test_the_identity_section_fits_its_budget() -> None:
    count = len  # one token per character, for the arithmetic
    snapshot = IdentitySnapshot(id="idn-1", crystal="I am steady. " * 40, source="manual", source_count=0, created_at="2026-01-01")
    whole = identity_section(snapshot, 10_000, count)
    assert whole is not None and whole.startswith("## Identity crystal (snapshot idn-1") and "> I am steady." in whole
    cut = identity_section(snapshot, 300, count)
    assert cut is not None and len(cut) <= 300 and IDENTITY_CUT in cut and "> I am steady." in cut
    assert identity_section(snapshot, 10, count) is None  # not even the heading fits: left out


@pytest.mark.anyio
async def test_session_start_injects_the_latest_crystal_within_the_budget(app: App) -> None:
    session = FakeSession("s1")
    prompts = PromptsFeature()
    prompts.attach(FakeHub(app, [session]))

    async def session_start(arguments: dict[str, str]) -> str:
        result = await prompts.handlers()["prompts/get"](FakeContext(session), {"name": "session_start", "arguments": arguments})
        return str(result["messages"][0]["content"]["text"])

    assert "Identity crystal" not in await session_start({})
    write(app.service, "I am the operator's assistant. I keep answers short.", CallContext())
    text = await session_start({})
    assert "## Identity crystal (snapshot idn-" in text and "> I am the operator's assistant. I keep answers short." in text
    assert text.index("## Identity crystal") < text.index("## Core memory")
    write(app.service, "I care about correctness. " * 300, CallContext())
    tight = await session_start({"tokenBudget": "200"})
    assert (
        IDENTITY_CUT in tight and app.service.factory.tokens.count(tight[tight.index("## Identity") : tight.index("## Core memory")]) <= 100
    )


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# ---------------------------------------------------------------- the tools and the prompt, through the official MCP client


def payload(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error is False, result.content
    block = result.content[0]
    assert isinstance(block, TextContent)
    parsed: dict[str, Any] = json.loads(block.text)
    return parsed


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_tools_and_session_start_over_stdio(tmp_path: Path, store_env: StoreEnv) -> None:
    env = {**server_env(store_env(tmp_path)), "MEMENTO_TOOLSETS": "memento,protocol", "MEMENTO_WORKSPACE": "studio"}
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--transport", "stdio"], env=env)
    async with Client(params, read_timeout_seconds=TIMEOUT_S) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"memento_identity", "memento_identity_update", "memento_identity_history", "memento_identity_crystallize"} <= names
        assert payload(await client.call_tool("memento_identity", {})) == {"found": False, "crystal": PLACEHOLDER}
        assert error_of(await client.call_tool("memento_identity_crystallize", {}))[0] == "conflict"
        code, message, _ = error_of(await client.call_tool("memento_identity_update", {"crystal": "y" * (MAX_CRYSTAL_CHARS + 1)}))
        assert code == "invalid_argument" and "at most" in message
        written = payload(await client.call_tool("memento_identity_update", {"crystal": "I am the studio's archivist."}))
        assert written["source"] == "manual" and written["crystal"] == "I am the studio's archivist."
        payload(await client.call_tool("remember", {"content": "Negatives are scanned at 4000 dpi", "topic": "scan", "type": "decision"}))
        draft = payload(await client.call_tool("memento_identity_crystallize", {"dry_run": True}))
        assert draft["stored"] is False and "I decided: Negatives are scanned at 4000 dpi" in draft["crystal"]
        made = payload(await client.call_tool("memento_identity_crystallize", {}))
        assert made["stored"] is True and made["drafted_by"] in ("extractive", "model")
        history = payload(await client.call_tool("memento_identity_history", {"limit": 5}))
        assert [s["id"] for s in history["snapshots"]][1] == written["id"] and history["total"] == 2
        current = payload(await client.call_tool("memento_identity", {}))
        assert current["found"] is True and current["id"] == made["id"] and current["source"] == "crystallized"
        (start,) = (await client.get_prompt("session_start", {})).messages
        assert isinstance(start.content, TextContent)
        assert "## Identity crystal" in start.content.text and "> - I decided: Negatives are scanned at 4000 dpi" in start.content.text
    other = {**env, "MEMENTO_WORKSPACE": "darkroom"}
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--transport", "stdio"], env=other)
    async with Client(params, read_timeout_seconds=TIMEOUT_S) as client:  # another workspace: no crystal
        assert payload(await client.call_tool("memento_identity", {}))["found"] is False
        (start,) = (await client.get_prompt("session_start", {})).messages
        assert isinstance(start.content, TextContent) and "Identity crystal" not in start.content.text


# ---------------------------------------------------------------- the /v1 routes over HTTP


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, module_store_env: StoreEnv, backend: str) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("protocol-identity")
    env = {**server_env(module_store_env(folder)), **rest_env(), "MEMENTO_TOOLSETS": "protocol"}
    running = start_http_server(env, folder / "server.log")
    try:
        assert_backend(running, backend)
        yield running
    finally:
        running.stop()


def v1(server: HttpServer, key: str, workspace: str) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}", "X-Memento-Workspace": workspace}
    return httpx.Client(base_url=server.url + "/v1", headers=headers, timeout=TIMEOUT_S)


@pytest.mark.slow
def test_the_identity_routes(server: HttpServer) -> None:
    with v1(server, KEY_A, "routes") as http:
        assert http.get("/identity").json() == {"found": False, "crystal": PLACEHOLDER}
        assert "nothing to crystallize" in problem_of(http.post("/identity/crystallize"), 409)["detail"]
        put = http.put("/identity", json={"crystal": "I am the first draft."})
        assert put.status_code == 200 and put.json()["source"] == "manual"
        posted = http.post("/identity", json={"crystal": "I am the second draft."})
        assert posted.status_code == 201
        assert http.get("/identity").json()["crystal"] == "I am the second draft."
        assert "at most" in problem_of(http.put("/identity", json={"crystal": "z" * (MAX_CRYSTAL_CHARS + 1)}), 400)["detail"]
        problem_of(http.put("/identity", json={}), 422)
        history = http.get("/identity/history", params={"limit": 1, "include_text": "true"}).json()
        assert history["total"] == 2 and [s["crystal"] for s in history["snapshots"]] == ["I am the second draft."]
        problem_of(http.get("/identity/history", params={"limit": 0}), 422)
        with httpx.Client(base_url=server.url + "/api", headers=http.headers, timeout=TIMEOUT_S) as api:  # the same workspace on /api
            stored = api.post("/memories", json={"content": "Backups run at 02:00 UTC", "memory_type": "decision"})
            assert stored.status_code == 201, stored.text
        dry = http.post("/identity/crystallize", json={"dry_run": True})
        assert dry.status_code == 200 and dry.json()["stored"] is False and "I decided: Backups run at 02:00 UTC" in dry.json()["crystal"]
        made = http.post("/identity/crystallize")
        assert made.status_code == 201 and made.json()["stored"] is True
        assert http.get("/identity").json()["id"] == made.json()["id"]
        assert http.get("/identity/history").json()["total"] == 3
    schema = httpx.get(server.url + "/v1/openapi.json", timeout=TIMEOUT_S).json()
    assert {"/identity", "/identity/history", "/identity/crystallize"} <= set(schema["paths"])


@pytest.mark.slow
def test_the_identity_routes_keep_agents_and_read_only_keys_apart(server: HttpServer) -> None:
    with v1(server, KEY_A, "iso") as a, v1(server, KEY_B, "iso") as b, v1(server, KEY_A_READ, "iso") as reader:
        a.put("/identity", json={"crystal": "I am agent A."}).raise_for_status()
        assert b.get("/identity").json()["found"] is False and b.get("/identity/history").json()["total"] == 0
        assert reader.get("/identity").json()["crystal"] == "I am agent A."
        problem_of(reader.put("/identity", json={"crystal": "I am someone else."}), 403)
        problem_of(reader.post("/identity/crystallize"), 403)
        assert a.get("/identity/history").json()["total"] == 1
