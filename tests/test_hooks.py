"""Agent-host hooks: the Claude Code settings.json example of docs/hooks.md, run as Claude Code
runs it (each command through a shell, the documented hook input on stdin) against a sample
transcript in Claude Code's JSON Lines format, from the runtime-only environment."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from runtime_env import runtime_python

from memento.app import App, build_app
from memento.cli import main
from memento.importers.session import remember_session
from memento.importers.transcript import distill, read_transcript
from memento.models import AgentScope, CallContext, MemoryStatsInput, RecallInput
from memento.results import RecallItem
from memento.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "tests" / "data" / "hooks" / "claude-code-session.jsonl"
SESSION = "6f1c2b7e-3a9d-4e21-9c55-0b8e2d4f7a13"
CWD = "/home/dev/atlas"
PRECOMPACT_LINES = 11  # the transcript as it stands when the conversation is compacted

DECISION = "We decided to always write exports as UTF-8 with a BOM so that Excel opens them correctly."
PROCEDURE = "To run the export locally, run `python -m atlas.export --out /tmp/out.csv`."
PREFERENCES = (
    "Always run the tests with `pytest -q` before you say you're done.",
    "From now on, never log customer emails such as [REDACTED_EMAIL] in debug output.",
)
QUESTION = "Should the nightly job also switch to UTF-8?"
ERROR = (
    "FAILED tests/test_export.py::test_unicode_names - UnicodeEncodeError: 'ascii' codec can't encode character '\\xe9' in position 4"
    " — fix: The root cause is that the CSV file is opened without an encoding, so Python falls back to ASCII on this machine."
)


def settings_example() -> dict[str, Any]:
    """The settings.json of docs/hooks.md (its first JSON block that declares hooks)."""
    blocks = re.findall(r"```json\n(.*?)```", (ROOT / "docs" / "hooks.md").read_text(encoding="utf-8"), re.DOTALL)
    found = [json.loads(b) for b in blocks if '"hooks"' in b]
    assert found, "docs/hooks.md has no settings.json example"
    example: dict[str, Any] = found[0]
    return example


def commands(example: dict[str, Any], event: str) -> list[str]:
    return [h["command"] for group in example["hooks"][event] for h in group["hooks"] if h["type"] == "command"]


@pytest.fixture
def store(tmp_path: Path) -> dict[str, str]:
    return {"DATABASE_URL": f"sqlite:///{tmp_path / 'memento.db'}", "EMBEDDING_PROVIDER": "hash", "LOG_LEVEL": "WARNING"}


@pytest.fixture
def opened(store: dict[str, str]) -> Iterator[App]:
    app = build_app(Settings(**store))  # type: ignore[arg-type]
    yield app
    app.close()


def topic_memories(app: App, topic: str = "atlas") -> dict[str, RecallItem]:
    found = app.service.recall(RecallInput(topic=topic, limit=200, tokenBudget=100_000, includeLinks=False), CallContext())
    return {f.content: f for f in found.fragments}


def run_hook(command: str, payload: dict[str, Any], store: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """One hook as Claude Code runs it: a shell command, the hook input as JSON on stdin."""
    path = f"{Path(runtime_python()).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, **store, "PATH": path}
    return subprocess.run(["bash", "-c", command], input=json.dumps(payload), env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_the_documented_claude_code_hooks_remember_a_session_and_load_it_next_time(tmp_path: Path, store: dict[str, str]) -> None:
    example = settings_example()
    assert set(example["hooks"]) == {"SessionStart", "PreCompact", "SessionEnd"}
    transcript = tmp_path / "projects" / "-home-dev-atlas" / f"{SESSION}.jsonl"
    transcript.parent.mkdir(parents=True)
    lines = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)
    transcript.write_text("".join(lines[:PRECOMPACT_LINES]), encoding="utf-8")
    common = {"session_id": SESSION, "transcript_path": str(transcript), "cwd": CWD, "permission_mode": "default"}

    def fire(event: str, **extra: str) -> list[subprocess.CompletedProcess[str]]:
        done = [run_hook(c, {**common, "hook_event_name": event, **extra}, store) for c in commands(example, event)]
        assert done and all(d.returncode == 0 for d in done), [d.stderr for d in done]
        return done

    (start,) = fire("SessionStart", source="startup")
    assert start.stdout.strip() == "_Memento has no memories for agent `default` yet._"

    fire("PreCompact", trigger="auto", custom_instructions="")
    transcript.write_text("".join(lines), encoding="utf-8")  # the session went on after compaction
    fire("SessionEnd", reason="prompt_input_exit")
    app = build_app(Settings(**store))  # type: ignore[arg-type]
    try:
        memories = topic_memories(app)
        summaries = [m for c, m in memories.items() if c.startswith("Session ")]
        assert len(summaries) == 1  # the pre-compaction summary was rewritten, not joined by a second
        assert (
            summaries[0].content.startswith("Session ")
            and " in atlas on 2025-06-03 — request: The CSV export crashes" in summaries[0].content
        )
        assert "files changed: src/atlas/export.py, src/atlas/logging.py" in summaries[0].content
        assert len(app.store.versions(AgentScope(), summaries[0].id)) == 1
        expected = {DECISION: "decision", ERROR: "error", PROCEDURE: "procedure", QUESTION: "fact"} | dict.fromkeys(
            PREFERENCES, "preference"
        )
        assert {c: memories[c].type.value for c in expected} == expected
        assert not any("jane.doe" in c or SESSION in c for c in memories)
        before = sorted((m.id, m.content) for m in memories.values())
    finally:
        app.close()

    fire("SessionEnd", reason="other")  # the same session once more: nothing new
    app = build_app(Settings(**store))  # type: ignore[arg-type]
    try:
        assert sorted((m.id, m.content) for m in topic_memories(app).values()) == before
    finally:
        app.close()

    (context,) = fire("SessionStart", source="resume")
    shown = context.stdout
    for title in ("## Preferences", "## Procedures", "## Errors and fixes", "## Recent decisions"):
        assert title in shown
    for text in (DECISION, PROCEDURE, *PREFERENCES, ERROR):
        assert f"- {text} (id frag-" in shown


def test_the_sample_transcript_distills_into_typed_items() -> None:
    distilled = distill(read_transcript(SAMPLE))
    assert distilled is not None
    assert (distilled.session_id, distilled.project, distilled.topic) == (SESSION, "atlas", "atlas")
    assert distilled.decisions == [DECISION]
    assert distilled.procedures == [PROCEDURE]
    assert distilled.open_questions == [QUESTION]
    assert distilled.preferences[0] == PREFERENCES[0]
    assert distilled.files == ["src/atlas/export.py", "src/atlas/logging.py"]
    assert len(distilled.errors_resolved) == 1 and distilled.errors_resolved[0].startswith(
        "FAILED tests/test_export.py::test_unicode_names"
    )


def test_a_session_is_remembered_whole_or_not_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    distilled = distill(read_transcript(SAMPLE))
    assert distilled is not None and len(distilled.preferences) >= 1
    app = build_app(Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'm.db'}", EMBEDDING_PROVIDER="hash"))
    try:
        seen: list[object] = []
        app.service.add_listener(seen.append)
        real = app.service.remember

        def failing(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("the disk filled up")  # the last step, after the summary and the reflection

        monkeypatch.setattr(app.service, "remember", failing)
        with pytest.raises(RuntimeError):
            remember_session(app.service, distilled, CallContext())
        stats = app.service.memory_stats(MemoryStatsInput(), CallContext())
        assert stats.total == 0 and seen == []  # nothing stored, nothing announced
        monkeypatch.setattr(app.service, "remember", real)
        report = remember_session(app.service, distilled, CallContext())
        assert report.created == app.service.memory_stats(MemoryStatsInput(), CallContext()).total > 0 and seen
    finally:
        app.close()


def test_a_transcript_without_conversation_gives_nothing(tmp_path: Path) -> None:
    meta_only = tmp_path / "t.jsonl"
    meta_only.write_text(
        '{"type": "summary", "summary": "Earlier work", "leafUuid": "x"}\n{"type": "user", "isMeta": true, "message": {"role": "user", "content": "caveat"}}\nnot json\n',
        encoding="utf-8",
    )
    transcript = read_transcript(meta_only)
    assert transcript.unreadable == 1 and distill(transcript) is None


def cli(
    args: list[str], stdin: str, store: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    for key, value in store.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        ("not json", "the hook input on stdin is not JSON"),
        ('{"session_id": "s1", "hook_event_name": "SessionEnd"}', "the hook input has no transcript_path"),
        ('{"session_id": "s1", "transcript_path": "/nonexistent/s1.jsonl"}', "cannot read the transcript /nonexistent/s1.jsonl"),
    ],
)
def test_a_bad_hook_input_is_reported_and_never_fails_the_host(
    stdin: str, message: str, store: dict[str, str], opened: App, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(["hook", "session-end"], stdin, store, monkeypatch, capsys)
    assert (code, out) == (0, "")
    assert message in err and "nothing stored" in err
    assert opened.service.memory_stats(MemoryStatsInput(), CallContext()).total == 0


def test_an_invalid_configuration_does_not_block_the_host(
    store: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(["hook", "session-end"], "{}", store | {"EMBEDDING_PROVIDER": "bogus"}, monkeypatch, capsys)
    assert code == 0 and "invalid configuration" in err
    code, _, _ = cli(["context"], "", store | {"EMBEDDING_PROVIDER": "bogus"}, monkeypatch, capsys)
    assert code == 2  # a person running `context` by hand is told plainly


def test_hook_by_hand_with_a_transcript_and_context_as_json(
    store: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(
        ["hook", "session-end", "--transcript", str(SAMPLE), "--agent", "claude", "--json"], "", store, monkeypatch, capsys
    )
    assert code == 0, err
    report = json.loads(out)
    assert (report["topic"], report["memories"], report["created"]) == ("atlas", 7, 7)
    code, out, _ = cli(["context", "--format", "json", "--agent", "claude"], "", store, monkeypatch, capsys)
    shown = {f["content"] for f in json.loads(out)["coreMemory"]}
    assert {DECISION, PROCEDURE, *PREFERENCES} <= shown
    code, out, _ = cli(["context", "--agent", "someone-else"], "", store, monkeypatch, capsys)
    assert out.strip() == "_Memento has no memories for agent `someone-else` yet._"  # namespaces stay apart
