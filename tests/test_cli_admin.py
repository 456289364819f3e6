"""The operator's terminal commands end to end: list, show, forget, export, backup, restore.

Each runs through `memento.cli.main` on a real SQLite store (and some through the real console
script, on a pseudo-terminal where the command behaves differently there). Refusals leave the
store and the files as they were.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import shutil
import sqlite3 as stdlib_sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import Clock, StoreEnv
from redis_harness import RedisServer
from terminal_helpers import memento_command, on_terminal

from memento.app import App, build_app
from memento.cli import main
from memento.embeddings.hashing import HashEmbedder
from memento.models import (
    AgentScope,
    AmendInput,
    CallContext,
    FeedbackInput,
    ForgetInput,
    LinkInput,
    RecallInput,
    RecordInput,
    RememberInput,
)
from memento.settings import Settings
from memento.storage import sqlite_backup
from memento.storage.protocol import SearchFilter

DATA = Path(__file__).resolve().parent / "data"
# The fields of an exported fragment the format promises (docs/export.md, version 2), with their JSON types.
FRAGMENT_KEYS: dict[str, type | tuple[type, ...]] = {
    "kind": str,
    "agentId": str,
    "sessionId": (str, type(None)),
    "id": str,
    "content": str,
    "detail": (str, type(None)),
    "topic": str,
    "type": str,
    "keywords": list,
    "importance": (int, float),
    "contentHash": str,
    "source": (str, type(None)),
    "linkedTo": list,
    "accessCount": int,
    "accessedAt": (str, type(None)),
    "createdAt": str,
    "ttlTier": str,
    "tierSince": (str, type(None)),
    "estimatedTokens": int,
    "utilityScore": (int, float),
    "verifiedAt": (str, type(None)),
    "isAnchor": bool,
    "confidence": (int, float),
    "tags": list,
    "context": (str, type(None)),
    "metadata": dict,
    "expiresAt": (str, type(None)),
    "pinned": bool,
    "memorySystem": str,
    "privacyScope": str,
    "originTrace": (dict, type(None)),
    "deletedAt": (str, type(None)),
    "memoryKey": (str, type(None)),
    "clientEmbedding": (str, type(None)),
    "judgedUtility": (int, float, type(None)),
    "versions": list,
}


# Stored columns an export carries that the views (`show`, tool results) leave out.
EXPORT_ONLY = {"contentHash", "tierSince", "verifiedAt", "deletedAt", "memoryKey", "clientEmbedding", "judgedUtility", "versions"}


@dataclass
class Seeded:
    db: Path
    ids: dict[str, str]


@pytest.fixture(autouse=True)
def keep_root_logging() -> Iterator[None]:
    """`main` installs its log handlers on the root logger; put the test run's back after."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level)


def open_app(db: Path, clock: Clock | None = None) -> App:
    return build_app(
        Settings(DATABASE_URL=f"sqlite:///{db}", EMBEDDING_PROVIDER="hash"), embedder=HashEmbedder(256), clock=clock or Clock()
    )


def seed(db: Path | dict[str, str]) -> dict[str, str]:
    """Three namespaces (alice, bob, the shared pool), a link both ways, an amended memory, a
    working-memory note, an expired and a soft-deleted memory; on the SQLite file `db` or the
    store whose settings `db` holds."""
    clock = Clock()
    if isinstance(db, Path):
        app = open_app(db, clock)
    else:
        app = build_app(Settings(**db, EMBEDDING_PROVIDER="hash"), embedder=HashEmbedder(256), clock=clock)  # type: ignore[arg-type]
    s, ctx = app.service, CallContext()
    ids: dict[str, str] = {}

    def remember(name: str, **fields: Any) -> str:
        clock.now += timedelta(minutes=1)
        ids[name] = s.remember(RememberInput.model_validate(fields), ctx).id
        return ids[name]

    try:
        remember("pool_fact", content="the staging database listens on port 5433", topic="database", type="fact")
        remember("alice_error", content="pgbouncer broke prepared statements", topic="database", type="error", agentId="alice")
        remember(
            "alice_fix",
            content="disable prepared statements in the driver",
            topic="database",
            type="procedure",
            agentId="alice",
            tags=["project:atlas"],
        )
        remember("alice_pref", content="alice prefers tea over coffee", topic="people", type="preference", agentId="alice")
        remember("bob_secret", content="bob's deploys go blue-green on fridays", topic="deploy", type="procedure", agentId="bob")
        remember(
            "alice_note",
            content="scratch: try the pool size 40",
            topic="scratch",
            type="episode",
            agentId="alice",
            scope="session",
            sessionId="s-1",
        )
        remember("alice_gone", content="an old alice fact that expired", topic="old", type="fact", agentId="alice")
        remember("alice_deleted", content="a soft-deleted alice fact", topic="old", type="fact", agentId="alice")
        s.link(LinkInput(fromId=ids["alice_error"], toId=ids["alice_fix"], relationType="resolved_by", agentId="alice"), ctx)
        s.link(LinkInput(fromId=ids["alice_fix"], toId=ids["pool_fact"], relationType="related", agentId="alice"), ctx)
        s.amend(AmendInput(id=ids["alice_error"], content="pgbouncer transaction mode broke prepared statements", agentId="alice"), ctx)
        s.amend(
            AmendInput(id=ids["alice_gone"], record=RecordInput(expiresAt=datetime.now(UTC) - timedelta(seconds=1)), agentId="alice"), ctx
        )
        app.store.soft_delete(AgentScope("alice"), [ids["alice_deleted"]], datetime.now(UTC))
    finally:
        app.close()
    return ids


@pytest.fixture
def seeded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Seeded:
    db = tmp_path / "memento.db"
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{db}")
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hash")
    return Seeded(db, seed(db))


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    code, out, err = cli(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def ids_in(listing: Any) -> set[str]:
    return {f["id"] for f in listing["fragments"]}


def env_for(db: Path) -> dict[str, str]:
    return {"DATABASE_URL": f"sqlite:///{db}", "EMBEDDING_PROVIDER": "hash"}


# ---------------------------------------------------------------- list


def test_list_shows_recent_memories_newest_first_as_lines_and_json(seeded: Seeded, capsys: pytest.CaptureFixture[str]) -> None:
    ids = seeded.ids
    code, out, _ = cli(capsys, "list")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:6] == ["ID", "TYPE", "TOPIC", "TIER", "CREATED", "(UTC)"]
    shown = [line.split()[0] for line in lines[1:-1]]
    live = ["bob_secret", "alice_pref", "alice_fix", "alice_error", "pool_fact"]  # newest first
    assert shown == [ids[name] for name in live]
    assert "tea over coffee" in out and lines[-1] == "-- 5 memories, newest first"

    listing = cli_json(capsys, "list")
    assert [f["id"] for f in listing["fragments"]] == [ids[name] for name in live] and listing["count"] == 5
    assert ids["alice_gone"] not in ids_in(listing) and ids["alice_deleted"] not in ids_in(listing)  # expired, soft-deleted
    assert ids["alice_note"] in ids_in(cli_json(capsys, "list", "--include-sessions"))


def test_list_filters_by_topic_type_tag_and_limit(seeded: Seeded, capsys: pytest.CaptureFixture[str]) -> None:
    ids = seeded.ids
    assert ids_in(cli_json(capsys, "list", "--topic", "database")) == {ids["pool_fact"], ids["alice_error"], ids["alice_fix"]}
    assert ids_in(cli_json(capsys, "list", "--type", "procedure")) == {ids["alice_fix"], ids["bob_secret"]}
    assert ids_in(cli_json(capsys, "list", "--tag", "Project:Atlas")) == {ids["alice_fix"]}
    assert ids_in(cli_json(capsys, "list", "--limit", "2")) == {ids["bob_secret"], ids["alice_pref"]}
    code, out, _ = cli(capsys, "list", "--topic", "nothing-here")
    assert (code, out) == (0, "No memories found.\n")
    code, _, err = cli(capsys, "list", "--limit", "0")
    assert code == 1 and "--limit" in err


def test_an_agent_never_sees_another_agents_memories(seeded: Seeded, capsys: pytest.CaptureFixture[str]) -> None:
    ids = seeded.ids
    alice = cli_json(capsys, "list", "--agent", "alice", "--include-sessions", "--limit", "100")
    assert ids_in(alice) == {ids[n] for n in ("alice_error", "alice_fix", "alice_pref", "alice_note", "pool_fact")}
    assert {f["agentId"] for f in alice["fragments"]} == {"alice", "default"}  # its own and the shared pool
    bob = cli_json(capsys, "list", "--agent", "bob", "--include-sessions", "--limit", "100")
    assert ids_in(bob) == {ids["bob_secret"], ids["pool_fact"]}
    code, out, _ = cli(capsys, "list", "--agent", "bob")
    assert "alice" not in out and "tea" not in out
    # show and forget as bob do not reach alice's memories; alice's stay.
    code, _, err = cli(capsys, "show", ids["alice_pref"], "--agent", "bob")
    assert code == 1 and "not_found" in err
    code, _, err = cli(capsys, "forget", ids["alice_pref"], "--agent", "bob", "--force")
    assert code == 1 and "not_found" in err
    assert ids["alice_pref"] in ids_in(cli_json(capsys, "list", "--agent", "alice"))
    code, _, err = cli(capsys, "list", "--agent", "system")
    assert code == 1 and "maintenance scope" in err
    code, _, err = cli(capsys, "list", "--agent", "no spaces allowed")
    assert code == 2 and "invalid input" in err


# ---------------------------------------------------------------- show


def test_show_prints_every_field_links_both_ways_and_versions(seeded: Seeded, capsys: pytest.CaptureFixture[str]) -> None:
    ids = seeded.ids
    shown = cli_json(capsys, "show", ids["alice_fix"])
    fragment = shown["fragment"]
    assert set(FRAGMENT_KEYS) - {"kind", *EXPORT_ONLY} <= set(fragment)
    assert fragment["agentId"] == "alice" and fragment["tags"] == ["project:atlas"] and fragment["sessionId"] is None
    links = {(link["direction"], link["relation"], link["from"], link["to"]) for link in shown["links"]}
    assert links == {("in", "resolved_by", ids["alice_error"], ids["alice_fix"]), ("out", "related", ids["alice_fix"], ids["pool_fact"])}
    assert shown["versions"] == []

    amended = cli_json(capsys, "show", ids["alice_error"])
    assert amended["fragment"]["content"] == "pgbouncer transaction mode broke prepared statements"
    (version,) = amended["versions"]
    assert version["content"] == "pgbouncer broke prepared statements" and version["amendedBy"] == "alice"

    code, out, _ = cli(capsys, "show", ids["alice_error"])
    assert code == 0
    assert f"-> resolved_by   {ids['alice_fix']}" in out
    assert "versions (1):" in out and "pgbouncer broke prepared statements" in out
    assert "privacyScope" in out and "memorySystem" in out and "episodic" in out
    code, _, err = cli(capsys, "show", "frag-does-not-exist")
    assert code == 1 and "frag-does-not-exist" in err and "not_found" in err


def test_show_says_why_a_memory_is_not_there(seeded: Seeded, capsys: pytest.CaptureFixture[str]) -> None:
    ids = seeded.ids
    code, _, err = cli(capsys, "show", ids["alice_deleted"], "--agent", "alice")
    assert code == 1 and f"{ids['alice_deleted']} was forgotten at" in err and "`restore` brings it back" in err
    code, _, err = cli(capsys, "show", ids["alice_gone"], "--agent", "alice")
    assert code == 1 and f"{ids['alice_gone']} expired at" in err
    code, _, err = cli(capsys, "show", ids["alice_deleted"], "--agent", "bob")  # not bob's to know about
    assert code == 1 and "not_found" in err and "forgotten" not in err


def test_show_counts_the_feedback_on_a_memory(seeded: Seeded, capsys: pytest.CaptureFixture[str]) -> None:
    fid = seeded.ids["alice_fix"]
    assert cli_json(capsys, "show", fid)["feedback"] == {}
    app = open_app(seeded.db)
    try:
        for event, agent in (("helpful", "alice"), ("helpful", "alice"), ("used", "alice"), ("not_helpful", "alice")):
            app.service.feedback(FeedbackInput.model_validate({"id": fid, "event": event}), CallContext(agent_id=agent))
    finally:
        app.close()
    assert cli_json(capsys, "show", fid)["feedback"] == {"helpful": 2, "not_helpful": 1, "used": 1}
    code, out, _ = cli(capsys, "show", fid)
    assert code == 0 and "feedback: helpful 2, not_helpful 1, used 1" in out


# ---------------------------------------------------------------- forget


def test_forget_follows_the_service_rules(seeded: Seeded, capsys: pytest.CaptureFixture[str]) -> None:
    ids = seeded.ids
    code, _, err = cli(capsys, "forget", ids["alice_pref"])  # a preference is permanent
    assert code == 1 and "--force" in err and "nothing deleted" in err
    assert ids["alice_pref"] in ids_in(cli_json(capsys, "list"))
    forgot = cli_json(capsys, "forget", ids["alice_pref"], "--force")
    assert forgot["deleted"] == [ids["alice_pref"]] and forgot["count"] == 1
    assert ids["alice_pref"] not in ids_in(cli_json(capsys, "list"))

    code, out, _ = cli(capsys, "forget", "--topic", "deploy")
    assert code == 0 and out.startswith("forgot 1 memory")
    assert ids["bob_secret"] not in ids_in(cli_json(capsys, "list"))
    for argv, message in (
        (["forget", "frag-nope"], "not_found"),
        (["forget"], "give a memory id or --topic"),
        (["forget", ids["pool_fact"], "--topic", "database"], "give a memory id or --topic"),
    ):
        code, _, err = cli(capsys, *argv)
        assert code == 1 and message in err
    assert len(cli_json(capsys, "list")["fragments"]) == 3


def test_forget_is_restorable_unless_hard_which_prints_the_receipt(seeded: Seeded, capsys: pytest.CaptureFixture[str]) -> None:
    ids = seeded.ids
    code, out, _ = cli(capsys, "forget", ids["alice_fix"], "--force")
    assert code == 0 and out.startswith("forgot 1 memory") and "restorable until" in out
    code, out, _ = cli(capsys, "forget", ids["alice_error"], "--force", "--hard")
    assert code == 0 and out.startswith("erased 1 memory") and "receipt erasure-" in out
    erased = cli_json(capsys, "forget", ids["pool_fact"], "--force", "--hard")
    assert erased["mode"] == "hard" and erased["receipt"]["memoryIds"] == [ids["pool_fact"]]
    code, _, err = cli(capsys, "show", ids["pool_fact"])
    assert code == 1 and "not_found" in err


@pytest.mark.slow
def test_forget_asks_on_a_terminal_and_a_no_keeps_the_memory(seeded: Seeded) -> None:
    target = seeded.ids["alice_fix"]
    declined = on_terminal([*memento_command(), "forget", target], env_for(seeded.db), stdin=True, typed="n\n")
    assert declined.code == 1 and "Forget memory " + target in declined.stderr and "Nothing deleted." in declined.stderr
    assert open_listing(seeded.db, target)
    agreed = on_terminal([*memento_command(), "forget", target], env_for(seeded.db), stdin=True, typed="yes\n")
    assert agreed.code == 0 and "forgot 1 memory" in agreed.stdout
    assert not open_listing(seeded.db, target)
    # --yes never asks (a script on a terminal).
    other = seeded.ids["pool_fact"]
    quiet = on_terminal([*memento_command(), "forget", other, "--yes"], env_for(seeded.db), stdin=True)
    assert quiet.code == 0 and "Forget" not in quiet.stderr and not open_listing(seeded.db, other)


def open_listing(db: Path, fragment_id: str) -> bool:
    """Whether the fragment is live, read with a fresh store (not through the CLI under test)."""
    app = open_app(db)
    try:
        return bool(app.store.get_many(AgentScope("system"), [fragment_id]))
    finally:
        app.close()


# ---------------------------------------------------------------- export


def read_export(text: str) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    lines = [json.loads(line) for line in text.splitlines()]
    head, body, tail = lines[0], lines[1:-1], lines[-1]
    kinds = [r["kind"] for r in body]
    assert kinds == sorted(kinds, key=lambda k: k != "fragment"), "every fragment comes before every link"
    assert tail["kind"] == "end" and tail["counts"].get("fragment", 0) == kinds.count("fragment"), "a trailer closes the export"
    return head, [r for r in body if r["kind"] == "fragment"], [r for r in body if r["kind"] == "link"]


def test_export_writes_the_format_for_every_agent(seeded: Seeded, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    ids = seeded.ids
    target = tmp_path / "out" / "all.jsonl"
    target.parent.mkdir()
    summary = cli_json(capsys, "export", str(target))
    assert summary == {
        "path": str(target),
        "format": "ndjson",
        "agents": ["alice", "bob", "default"],
        "fragments": 5,
        "links": 2,
        "entities": 0,
        "counts": {"fragment": 5, "link": 2, "versions": 1},
    }
    head, fragments, links = read_export(target.read_text(encoding="utf-8"))
    assert head["format"] == "memento-export" and head["version"] == 2 and head["agents"] == ["alice", "bob", "default"]
    assert datetime.fromisoformat(head["exportedAt"]).tzinfo is not None and isinstance(head["memento"], str)
    assert {f["id"] for f in fragments} == {ids[n] for n in ("pool_fact", "alice_error", "alice_fix", "alice_pref", "bob_secret")}
    for record in fragments:
        for key, kind in FRAGMENT_KEYS.items():
            assert isinstance(record[key], kind), (key, record[key])
    fix = next(f for f in fragments if f["id"] == ids["alice_fix"])
    assert fix["agentId"] == "alice" and fix["tags"] == ["project:atlas"] and fix["type"] == "procedure"
    assert {(x["agentId"], x["fromId"], x["toId"], x["relationType"]) for x in links} == {
        ("alice", ids["alice_error"], ids["alice_fix"], "resolved_by"),
        ("alice", ids["alice_fix"], ids["pool_fact"], "related"),
    }
    assert sorted(p.name for p in target.parent.iterdir()) == ["all.jsonl"]  # no temporary file left

    with_sessions = cli_json(capsys, "export", str(tmp_path / "s.jsonl"), "--include-sessions")
    _, fragments, _ = read_export((tmp_path / "s.jsonl").read_text(encoding="utf-8"))
    note = next(f for f in fragments if f["id"] == ids["alice_note"])
    assert with_sessions["fragments"] == 6 and note["sessionId"] == "s-1"


def test_export_of_chosen_agents_to_stdout(seeded: Seeded, capsys: pytest.CaptureFixture[str]) -> None:
    ids = seeded.ids
    code, out, err = cli(capsys, "export", "--agent", "alice")
    assert code == 0 and "exported 3 memories, 1 version, 1 link and 0 entities of 1 agent to -" in err
    head, fragments, links = read_export(out)
    assert head["agents"] == ["alice"]
    assert {f["id"] for f in fragments} == {ids["alice_error"], ids["alice_fix"], ids["alice_pref"]}
    assert {f["agentId"] for f in fragments} == {"alice"}
    assert [(x["fromId"], x["toId"]) for x in links] == [(ids["alice_error"], ids["alice_fix"])]  # the pool end is not exported
    code, out, _ = cli(capsys, "export", "-", "--agent", "alice", "--agent", "default")
    head, fragments, links = read_export(out)
    assert head["agents"] == ["alice", "default"] and len(fragments) == 4 and len(links) == 2
    assert "bob" not in out


def test_export_refuses_to_overwrite_and_bad_targets(seeded: Seeded, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "keep.jsonl"
    target.write_text("precious\n", encoding="utf-8")
    code, _, err = cli(capsys, "export", str(target))
    assert code == 1 and "already exists" in err and target.read_text(encoding="utf-8") == "precious\n"
    code, _, err = cli(capsys, "export", str(tmp_path / "missing" / "x.jsonl"))
    assert code == 1 and "does not exist" in err
    code, _, err = cli(capsys, "export", str(tmp_path))
    assert code == 1 and "is a directory" in err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")) == []
    assert cli_json(capsys, "export", str(target), "--force")["fragments"] == 5
    assert target.read_text(encoding="utf-8").startswith('{"format":"memento-export"')


def test_export_with_forgotten_rows_restores_into_an_empty_store_as_it_was(
    seeded: Seeded, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = seeded.ids
    target = tmp_path / "all.jsonl"
    summary = cli_json(capsys, "export", str(target), "--include-forgotten", "--include-sessions")
    _, fragments, _ = read_export(target.read_text(encoding="utf-8"))
    by_id = {f["id"]: f for f in fragments}
    assert summary["fragments"] == 8 and by_id[ids["alice_deleted"]]["deletedAt"] and by_id[ids["alice_gone"]]["expiresAt"]
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'copy.db'}")
    report = cli_json(capsys, "import", str(target))
    assert (report["stored"], report["alreadyKnown"], report["links"], report["skipped"]) == (8, 0, 2, [])
    again = cli_json(capsys, "import", str(target))  # a second time: everything is there already
    assert (again["stored"], again["alreadyKnown"], again["linksKnown"]) == (0, 8, 2)
    copy = tmp_path / "copy.jsonl"
    cli_json(capsys, "export", str(copy), "--include-forgotten", "--include-sessions")
    assert copy.read_text(encoding="utf-8").splitlines()[1:] == target.read_text(encoding="utf-8").splitlines()[1:]


def test_export_as_csv_markdown_and_a_folder_of_notes(seeded: Seeded, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    ids = seeded.ids
    summary = cli_json(capsys, "export", str(tmp_path / "m.csv"), "--format", "csv", "--agent", "alice")
    rows = list(csv.DictReader(io.StringIO((tmp_path / "m.csv").read_text(encoding="utf-8"), newline="")))
    assert summary["format"] == "csv" and {r["id"] for r in rows} == {ids["alice_error"], ids["alice_fix"], ids["alice_pref"]}
    code, out, err = cli(capsys, "export", "--format", "markdown", "--agent", "alice")
    assert code == 0 and out.startswith("# Memento export") and out.count("\n## ") == 3 and "exported 3 memories of 1 agent" in err
    notes = tmp_path / "notes"
    assert cli_json(capsys, "export", str(notes), "--format", "markdown", "--folder")["fragments"] == 5
    assert sorted(p.name for p in notes.iterdir()) == sorted(
        f"{ids[n]}.md" for n in ("pool_fact", "alice_error", "alice_fix", "alice_pref", "bob_secret")
    )
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]
    code, _, err = cli(capsys, "export", str(notes), "--format", "markdown", "--folder")
    assert code == 1 and "not empty" in err
    code, _, err = cli(capsys, "export", str(tmp_path / "x.csv"), "--folder")
    assert code == 1 and "--format markdown" in err


@pytest.mark.slow
def test_export_through_the_console_script_draws_a_progress_bar_only_on_a_terminal(seeded: Seeded, tmp_path: Path) -> None:
    argv = [*memento_command(), "export", str(tmp_path / "a.jsonl")]
    shown = on_terminal(argv, env_for(seeded.db), stderr=True)
    assert shown.code == 0 and "exported 5 memories" in shown.stdout
    assert "exporting" in shown.terminal and "100%" in shown.terminal and "5/5" in shown.terminal
    piped = on_terminal([*argv[:-1], str(tmp_path / "b.jsonl")], env_for(seeded.db))
    assert piped.code == 0 and "exporting" not in piped.stderr and "100%" not in piped.stderr
    assert (
        read_export((tmp_path / "a.jsonl").read_text(encoding="utf-8"))[1]
        == read_export((tmp_path / "b.jsonl").read_text(encoding="utf-8"))[1]
    )


# ---------------------------------------------------------------- backup and restore


def test_backup_while_another_connection_keeps_writing_is_one_consistent_snapshot(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    writer = open_app(db)
    try:
        for i in range(300):  # enough pages for many backup steps
            writer.service.remember(
                RememberInput(content=f"memory number {i} about the warehouse", topic="bulk", type="fact"), CallContext()
            )
        before = writer.store.count(AgentScope("system"), SearchFilter())
        written: list[str] = []
        pages: dict[str, int] = {}

        def write_between_steps(done: int, total: int) -> None:
            # Another connection commits a memory between every two steps of the copy; a copy
            # that each write sent back to its start would never end.
            pages.setdefault("first", total)
            assert len(written) <= pages["first"], "the backup restarts after every write"
            r = writer.service.remember(
                RememberInput(content=f"written during the backup {done}/{total} #{len(written)}", topic="late", type="fact"), CallContext()
            )
            written.append(r.id)

        sqlite_backup_steps = sqlite_backup.STEP_PAGES
        sqlite_backup.STEP_PAGES = 4
        try:
            report = sqlite_backup.backup(db, tmp_path / "copy.db", progress=write_between_steps)
        finally:
            sqlite_backup.STEP_PAGES = sqlite_backup_steps
        assert len(written) >= 10  # the writes really interleaved with the copy
        assert report.migrations == sqlite_backup.known_migrations()
    finally:
        writer.close()
    assert not (tmp_path / "copy.db-wal").exists()
    with stdlib_sqlite3.connect(tmp_path / "copy.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # a standalone file
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    copy = open_app(tmp_path / "copy.db")
    try:
        assert copy.store.count(AgentScope("system"), SearchFilter()) == before  # the snapshot: none of the late writes
        assert not copy.store.get_many(AgentScope("system"), written)
        found = copy.service.recall(RecallInput(text="warehouse memory number 7", limit=3), CallContext())
        assert found.fragments and "warehouse" in found.fragments[0].content  # a working store
    finally:
        copy.close()


def test_backup_and_restore_through_the_cli(seeded: Seeded, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    ids = seeded.ids
    copy = tmp_path / "backups" / "monday.db"
    copy.parent.mkdir()
    made = cli_json(capsys, "backup", str(copy))
    assert made["path"] == str(copy) and made["database"] == str(seeded.db) and made["bytes"] == copy.stat().st_size
    assert made["schema"] == sqlite_backup.known_migrations()[-1].removesuffix(".sql")
    before = cli_json(capsys, "list", "--include-sessions")

    cli_json(capsys, "forget", "--topic", "database", "--force")
    assert cli_json(capsys, "list")["count"] == 2

    code, _, err = cli(capsys, "restore", str(copy))  # the database exists: refused, nothing changed
    assert code == 1 and "already exists" in err and cli_json(capsys, "list")["count"] == 2
    restored = cli_json(capsys, "restore", str(copy), "--force")
    kept = Path(restored["replaced"])
    assert kept.parent == seeded.db.parent and kept.name.startswith("memento.db.before-restore-")
    assert cli_json(capsys, "list", "--include-sessions") == before
    assert ids["alice_error"] in ids_in(cli_json(capsys, "list", "--agent", "alice"))
    with stdlib_sqlite3.connect(kept) as conn:  # the replaced database, as it was just before
        assert conn.execute("SELECT COUNT(*) FROM fragments WHERE topic = 'database' AND deleted_at IS NULL").fetchone()[0] == 0
    with stdlib_sqlite3.connect(seeded.db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    code, out, _ = cli(capsys, "backup", str(tmp_path / "text.db"))
    assert code == 0 and out.startswith(f"backed up {seeded.db} to {tmp_path / 'text.db'}") and "integrity ok" in out


def test_backup_refusals_change_nothing(seeded: Seeded, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    existing = tmp_path / "existing.db"
    existing.write_bytes(b"an older backup")
    code, _, err = cli(capsys, "backup", str(existing))
    assert code == 1 and "conflict" in err and existing.read_bytes() == b"an older backup"
    code, _, err = cli(capsys, "backup", str(tmp_path / "no-such-folder" / "x.db"))
    assert code == 1 and "does not exist" in err
    code, _, err = cli(capsys, "backup", str(seeded.db))
    assert code == 1 and "the database itself" in err
    assert sorted(p.name for p in tmp_path.iterdir() if ".partial" in p.name) == []
    assert cli_json(capsys, "backup", str(existing), "--force")["path"] == str(existing)
    assert sqlite_backup.inspect(existing) == sqlite_backup.known_migrations()


def test_restore_refuses_what_is_not_a_memento_database(seeded: Seeded, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    before = cli_json(capsys, "list")
    text = tmp_path / "notes.txt"
    text.write_text("not a database at all", encoding="utf-8")
    other = tmp_path / "other.sqlite"
    with stdlib_sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE things (x)")
    truncated = tmp_path / "truncated.db"
    truncated.write_bytes(seeded.db.read_bytes()[:8192])
    for path, message in (
        (tmp_path / "missing.db", "does not exist"),
        (text, "is not a SQLite database"),
        (other, "not a Memento store"),
        (truncated, "truncated.db"),
    ):
        code, _, err = cli(capsys, "restore", str(path), "--force")
        assert code == 1 and message in err, err
    assert cli_json(capsys, "list") == before
    assert [p.name for p in seeded.db.parent.iterdir() if "before-restore" in p.name or ".partial" in p.name] == []


def test_restore_into_a_new_place_upgrades_an_old_backup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmp_path / "backups" / "old.sqlite"
    old.parent.mkdir()
    shutil.copy(DATA / "store-0484b5b.sqlite", old)  # a WAL-mode file written by an earlier release
    assert sqlite_backup.inspect(old) != sqlite_backup.known_migrations()
    db = tmp_path / "fresh" / "memento.db"
    db.parent.mkdir()
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{db}")
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hash")
    code, out, err = cli(capsys, "restore", str(old))
    assert code == 0, err
    assert "upgraded the backup's schema" in out and "kept" not in out
    assert sqlite_backup.inspect(db) == sqlite_backup.known_migrations()
    assert cli_json(capsys, "list", "--limit", "1000")["count"] > 0
    assert sqlite_backup.inspect(old) != sqlite_backup.known_migrations()  # the backup itself is untouched
    assert [p.name for p in old.parent.iterdir()] == ["old.sqlite"]  # reading it left no -wal or -shm beside it


SERVER_MEMORIES = ("the api deploys with blue-green switches", "staging listens on port 5433", "pgbouncer breaks prepared statements")
OTHER_MEMORIES = ("the api now deploys with canaries", "staging moved to port 6543", "prepared statements work in session mode")
QUERIES = ("how do we deploy the api", "which port does staging use", "what breaks prepared statements")


def remember_all(app: App, contents: tuple[str, ...], topic: str) -> None:
    for content in contents:
        app.service.remember(RememberInput(content=content, topic=topic, type="fact"), CallContext())


def answers(app: App) -> list[list[tuple[str, float | None]]]:
    """What recall finds for each query: ids with their vector similarity, in rank order."""
    found = [app.service.recall(RecallInput(text=q), CallContext()) for q in QUERIES]
    return [[(f.id, f.similarity) for f in result.fragments] for result in found]


@pytest.mark.parametrize("backup_of", ["this database, earlier", "another database"])
def test_a_store_left_open_across_a_restore_answers_like_a_fresh_one(
    backup_of: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server keeps its store open while the operator restores: it finds the restored memories
    by meaning at once, with their vectors, never the replaced database's vectors under the same
    keys (the other database's fragments reuse the server's row numbers, with a later clock)."""
    db = tmp_path / "memento.db"
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{db}")
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hash")
    server = open_app(db)
    try:
        remember_all(server, SERVER_MEMORIES, "ops")
        answers(server)  # the in-memory vector index is built and in use
        if backup_of == "another database":
            other = open_app(tmp_path / "other.db")
            try:
                remember_all(other, OTHER_MEMORIES, "elsewhere")
                remember_all(other, tuple(f"filler {i}" for i in range(20)), "filler")  # its vector clock runs ahead
                other.service.forget(ForgetInput(topic="filler", force=True), CallContext())
            finally:
                other.close()
            sqlite_backup.backup(tmp_path / "other.db", tmp_path / "b.db")
            restored_topic = "elsewhere"
        else:
            cli_json(capsys, "backup", str(tmp_path / "b.db"))
            server.service.forget(ForgetInput(topic="ops", force=True), CallContext())
            remember_all(server, OTHER_MEMORIES, "ops2")
            answers(server)
            restored_topic = "ops"
        cli_json(capsys, "restore", str(tmp_path / "b.db"), "--force")
        fresh = open_app(db)
        try:
            expected = answers(fresh)
            assert answers(server) == expected
            shown = server.service.recall(RecallInput(text=QUERIES[0]), CallContext()).fragments
            assert shown and {f.topic for f in shown} == {restored_topic}
            stats = server.store.stats(AgentScope("default"))
            assert stats["indexed"] == stats["embedded"] == 3
        finally:
            fresh.close()
    finally:
        server.close()


def test_a_damaged_database_is_set_aside_by_a_forced_restore(seeded: Seeded, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    copy = tmp_path / "good.db"
    cli_json(capsys, "backup", str(copy))
    expected = cli_json(capsys, "list")
    seeded.db.write_bytes(b"SQLite format 3\x00" + os.urandom(4096))  # the live file is ruined
    for suffix in ("-wal", "-shm"):
        Path(str(seeded.db) + suffix).unlink(missing_ok=True)
    restored = cli_json(capsys, "restore", str(copy), "--force")
    assert any("moved to" in note for note in restored["notes"])
    assert Path(restored["replaced"]).read_bytes().startswith(b"SQLite format 3\x00")
    assert cli_json(capsys, "list") == expected


def test_backup_and_restore_on_postgresql_point_to_pg_dump(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://memento@127.0.0.1:1/memento")
    for command in ("backup", "restore"):
        code, _, err = cli(capsys, command, str(tmp_path / "x.db"))
        assert code == 1 and "pg_dump" in err and "memento export" in err
    assert list(tmp_path.iterdir()) == []


def test_commands_on_a_missing_database_create_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "nothing.db"
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{db}")
    for argv in (["list"], ["show", "frag-x"], ["forget", "frag-x"], ["export"], ["backup", str(tmp_path / "b.db")]):
        code, _, err = cli(capsys, *argv)
        assert code == 1 and ("no Memento database" in err or "no database" in err), (argv, err)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.backends("sqlite", "postgres")
def test_list_show_and_export_read_the_same_on_every_backend(
    store_env: StoreEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env = store_env(tmp_path)
    for name, value in {**env, "EMBEDDING_PROVIDER": "hash"}.items():
        monkeypatch.setenv(name, value)
    ids = seed(env)
    listing = cli_json(capsys, "list", "--include-sessions", "--agent", "alice")
    assert ids_in(listing) == {ids[n] for n in ("alice_error", "alice_fix", "alice_pref", "alice_note", "pool_fact")}
    shown = cli_json(capsys, "show", ids["alice_fix"])
    assert {link["relation"] for link in shown["links"]} == {"resolved_by", "related"}
    code, out, _ = cli(capsys, "export", "--include-sessions")
    head, fragments, links = read_export(out)
    assert head["agents"] == ["alice", "bob", "default"] and len(fragments) == 6 and len(links) == 2
    assert ids["alice_gone"] not in {f["id"] for f in fragments} and ids["alice_deleted"] not in {f["id"] for f in fragments}


def test_restore_brings_the_redis_keyword_index_in_line(
    shared_redis: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With REDIS_ENABLED, the L1 keyword index a running server reads follows the restore."""
    import redis

    with redis.Redis(port=shared_redis.port) as client:
        client.flushall()
    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'memento.db'}",
        "EMBEDDING_PROVIDER": "hash",
        "REDIS_ENABLED": "true",
        "REDIS_HOST": "127.0.0.1",
        "REDIS_PORT": str(shared_redis.port),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    server = build_app(Settings(), embedder=HashEmbedder(256))
    try:
        assert server.keyword_index is not None and server.keyword_index.wait_ready()
        ctx = CallContext()
        before = server.service.remember(
            RememberInput(content="the nightly report runs at two", topic="ops", type="fact", keywords=["nightly"]), ctx
        )
        cli_json(capsys, "backup", str(tmp_path / "b.db"))
        server.service.forget(ForgetInput(id=before.id, force=True), ctx)
        after = server.service.remember(
            RememberInput(content="the nightly report moved to four", topic="ops", type="fact", keywords=["nightly"]), ctx
        )
        assert server.keyword_index.lookup(AgentScope("default"), ["nightly"]) == [after.id]
        restored = cli_json(capsys, "restore", str(tmp_path / "b.db"), "--force")
        assert restored["keywordIndexRebuilt"] == 1
        assert server.keyword_index.lookup(AgentScope("default"), ["nightly"]) == [before.id]
        assert [f.id for f in server.service.recall(RecallInput(keywords=["nightly"]), ctx).fragments] == [before.id]
    finally:
        server.close()


# ---------------------------------------------------------------- reindex --text


def test_reindex_text_repairs_what_a_faulty_analyser_indexed_and_embeds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`memento reindex --text` writes every memory's full-text entries again with the current
    analyser, with progress on stderr; the vectors stay as they were."""
    from memento import analysis
    from memento.storage import terms

    class Faulty:
        def stemWord(self, word: str) -> str:
            return word[::-1]

    db = tmp_path / "memento.db"
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{db}")
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hash")

    def caches_cleared() -> None:
        analysis._stem.cache_clear()
        terms._word_terms.cache_clear()
        terms.TEXTS.clear()

    monkeypatch.setattr(analysis, "STEMMER_FACTORY", Faulty)
    caches_cleared()
    app = build_app(Settings())
    try:
        ctx = CallContext(agent_id="alice")
        ids = [
            app.service.remember(RememberInput(content=f"The deployment pipeline failed on step {i}", topic="ops", type="error"), ctx).id
            for i in range(3)
        ]
    finally:
        app.close()
        monkeypatch.undo()
        caches_cleared()
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{db}")
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hash")

    def found() -> set[str]:
        app = build_app(Settings())
        try:
            return {
                h.id for h in app.store.text_search(AgentScope("alice"), analysis.query_terms("deployments failing"), SearchFilter(), 10)
            }
        finally:
            app.close()

    assert found() == set()
    vectors = stdlib_sqlite3.connect(db).execute("SELECT COUNT(*) FROM fragment_embeddings").fetchone()[0]
    code, _, err = cli(capsys, "reindex", "--text")
    assert code == 0, err
    assert "Done: 3 re-analysed." in err and "Re-embedding" not in err
    assert found() == set(ids)
    assert stdlib_sqlite3.connect(db).execute("SELECT COUNT(*) FROM fragment_embeddings").fetchone()[0] == vectors
