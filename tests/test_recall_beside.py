"""A recall embeds its query and reads the vector tier beside its keyword and full-text tiers
(retrieval/beside.py, MEMENTO_RECALL_WORKERS): the same answers as one tier after another, on a
helper thread only when one is free and the caller is outside a unit of work."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from memento.app import App, build_app
from memento.embeddings.hashing import HashEmbedder
from memento.graph import SearchMode
from memento.models import AgentScope, CallContext, FragmentType, RecallInput, RememberInput
from memento.retrieval import beside as beside_module
from memento.retrieval.beside import Beside, workers_for
from memento.retrieval.readahead import ReadAhead
from memento.settings import Settings
from memento.storage.protocol import SearchFilter

TRACE: contextvars.ContextVar[str] = contextvars.ContextVar("trace", default="none")


class TestBeside:
    def test_the_call_runs_on_a_helper_thread_with_the_callers_context(self) -> None:
        pool = Beside(1)
        try:
            TRACE.set("request-7")
            seen: dict[str, Any] = {}

            def call() -> str:
                seen.update(thread=threading.current_thread().name, trace=TRACE.get())
                return "done"

            pending = pool.start(call)
            assert pending.beside and pending.result() == "done"
            assert seen == {"thread": seen["thread"], "trace": "request-7"}
            assert seen["thread"].startswith("memento-recall") and seen["thread"] != threading.current_thread().name
        finally:
            pool.close()

    def test_with_every_thread_busy_the_call_runs_in_the_caller_when_asked_for(self) -> None:
        pool = Beside(1)
        release, started = threading.Event(), threading.Event()
        try:

            def hold() -> bool:
                started.set()
                return release.wait(10)

            blocking = pool.start(hold)
            assert blocking.beside and started.wait(10)
            ran: list[str] = []

            def note() -> int:
                ran.append(threading.current_thread().name)
                return len(ran)

            deferred = pool.start(note)
            assert not deferred.beside and ran == []  # nothing ran yet: it waits for its result
            assert deferred.result() == 1 and ran == [threading.current_thread().name]
            release.set()
            assert blocking.result() is True
            assert pool.start(lambda: 3).beside  # the thread is free again
        finally:
            release.set()
            pool.close()

    def test_not_allowed_no_threads_or_closed_runs_in_the_caller(self) -> None:
        me = threading.current_thread().name
        pool = Beside(2)
        assert not pool.start(lambda: 1, allowed=False).beside
        pool.close()
        after = pool.start(lambda: threading.current_thread().name)
        assert not after.beside and after.result() == me
        none = Beside(0)
        assert not none.start(lambda: 1).beside and none.start(lambda: 2).result() == 2
        none.close()

    def test_an_exception_reaches_the_caller_and_frees_the_thread(self) -> None:
        pool = Beside(1)
        try:

            def fail() -> None:
                raise ValueError("tier failed")

            pending = pool.start(fail)
            assert pending.beside
            with pytest.raises(ValueError, match="tier failed"):
                pending.result()
            assert pool.start(lambda: 1).beside
        finally:
            pool.close()

    def test_the_worker_count_setting(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for cores, expected in ((1, 0), (2, 1), (4, 3), (16, 4)):
            monkeypatch.setattr(beside_module, "usable_cores", lambda cores=cores: cores)
            assert workers_for("auto") == workers_for(" AUTO ") == expected
        assert workers_for("0") == 0 and workers_for("3") == 3
        for bad in ("-1", "two", "65", ""):
            with pytest.raises(ValueError, match="MEMENTO_RECALL_WORKERS"):
                workers_for(bad)
            with pytest.raises(ValidationError, match="MEMENTO_RECALL_WORKERS"):
                Settings(MEMENTO_RECALL_WORKERS=bad)
        assert Settings().recall_workers == "auto"


WRITES = [
    ("We adopted a beagle named Biscuit in March", "pets"),
    ("Biscuit chewed through the garden hose", "pets"),
    ("The quarterly report is due on the fifth", "work"),
    ("Standup moved to 9:30 because of the new office hours", "work"),
    ("The garden needs a new hose and some tomato stakes", "home"),
    ("My sister visits from Lisbon next week", "family"),
    ("Lisbon trip: book the tram tour and the fado evening", "travel"),
    ("The beagle is afraid of the vacuum cleaner", "pets"),
]
QUESTIONS = ["What is the dog called?", "garden hose", "when is the report due", "who is visiting from Lisbon", "fado"]


def build(tmp_path: Path, name: str, workers: str) -> App:
    settings = Settings(DATABASE_URL=f"sqlite:///{tmp_path / name}", EMBEDDING_PROVIDER="hash", MEMENTO_RECALL_WORKERS=workers)
    return build_app(settings, embedder=HashEmbedder(256))


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[App, App]]:
    apps = build(tmp_path, "serial.db", "0"), build(tmp_path, "beside.db", "2")
    ctx = CallContext(agent_id="alice", session_id="s1")
    for app in apps:
        for content, topic in WRITES:
            app.service.remember(RememberInput(content=content, topic=topic, type=FragmentType.FACT), ctx)
    yield apps
    for app in apps:
        app.close()


def record_threads(app: App, method: str) -> list[str]:
    """The names of the threads `app.store.<method>` is called on, from now on."""
    names: list[str] = []
    inner = getattr(app.store, method)

    def spy(*args: Any, **kwargs: Any) -> Any:
        names.append(threading.current_thread().name)
        return inner(*args, **kwargs)

    setattr(app.store, method, spy)
    return names


def answers(app: App, **kw: Any) -> list[list[tuple[str, float | None]]]:
    ctx = CallContext(agent_id="alice", session_id="s1")
    out = []
    for q in QUESTIONS:
        result = app.service.recall(RecallInput(text=q, limit=5, includeLinks=False, verbose=True, **kw), ctx)
        out.append([(f.content, f.score) for f in result.fragments])
    return out


def test_a_recall_answers_the_same_with_its_tiers_beside_each_other(pair: tuple[App, App]) -> None:
    serial, parallel = pair
    assert serial.service.beside.workers == 0 and parallel.service.beside.workers == 2
    on_threads = record_threads(parallel, "vector_search")
    text_threads = record_threads(parallel, "text_search")
    assert answers(serial) == answers(parallel)
    assert answers(serial, mode=SearchMode.HYBRID) == answers(parallel, mode=SearchMode.HYBRID)
    me = threading.current_thread().name
    assert on_threads and all(name.startswith("memento-recall") for name in on_threads)
    assert text_threads and set(text_threads) == {me}
    result = parallel.service.recall(RecallInput(text="beagle", limit=3, verbose=True), CallContext(agent_id="alice"))
    assert result.tiers is not None and result.tiers.semantic != "unused" and result.tiers.text > 0


def test_the_tiers_weigh_the_query_terms_once_between_them(pair: tuple[App, App]) -> None:
    """The full-text tier (caller) and the text scores of the vector tier's hits (helper) weigh the
    same terms: one plan a recall, the second tier waiting for the first's (storage/terms.py
    SharedPlans), and the answers as when each tier plans for itself (the serial app, whose
    vector tier runs in the caller)."""
    serial, parallel = pair
    search = parallel.store.search  # type: ignore[attr-defined]
    planned: list[str] = []
    inner = search.plan

    def spy(*args: Any, **kwargs: Any) -> Any:
        planned.append(threading.current_thread().name)
        return inner(*args, **kwargs)

    search.plan = spy
    scored = record_threads(parallel, "text_scores")
    ctx = CallContext(agent_id="alice")
    for q in ("beagle garden hose", "Lisbon fado evening", "report due"):
        planned.clear()
        scored.clear()
        parallel.service.recall(RecallInput(text=q, limit=5), ctx)
        assert scored and all(name.startswith("memento-recall") for name in scored), scored  # the helper asked too
        assert len(planned) == 1, planned
    parallel.service.recall(RecallInput(text="beagle garden hose", limit=5), ctx)
    assert len(planned) == 2  # a plan is kept for its recall only: the next one weighs the terms again
    assert answers(serial) == answers(parallel)


def test_inside_a_unit_of_work_the_vector_tier_stays_on_the_callers_thread(pair: tuple[App, App]) -> None:
    _, parallel = pair
    on_threads = record_threads(parallel, "vector_search")
    ctx = CallContext(agent_id="alice")
    with parallel.store.rehearsal():
        parallel.service.recall(RecallInput(text="beagle", limit=3), ctx)
    with parallel.store.atomic():
        parallel.service.recall(RecallInput(text="garden", limit=3), ctx)
    assert on_threads == [threading.current_thread().name] * 2
    parallel.service.recall(RecallInput(text="garden", limit=3), ctx)
    assert on_threads[-1].startswith("memento-recall")


def test_a_failing_vector_tier_fails_the_recall_and_the_next_one_works(pair: tuple[App, App]) -> None:
    _, parallel = pair
    inner = parallel.store.vector_search
    calls = {"n": 0}

    def broken(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("index unreadable")
        return inner(*args, **kwargs)

    parallel.store.vector_search = broken  # type: ignore[method-assign]
    ctx = CallContext(agent_id="alice")
    with pytest.raises(RuntimeError, match="index unreadable"):
        parallel.service.recall(RecallInput(text="beagle", limit=3), ctx)
    assert parallel.service.recall(RecallInput(text="beagle", limit=3), ctx).count > 0


class SlowEmbedder(HashEmbedder):
    """The hashing embedder taking as long for a query as the local model does (~20 ms)."""

    def embed_query(self, text: str) -> Any:
        time.sleep(0.02)
        return super().embed_query(text)


CONVERSATION = [
    "Where did you and Sam decide to live?",
    "We rented a flat near the station in the end",
    "Is it big enough for the piano?",
    "Barely, the piano sits in the hallway",
    "What about the beagle?",
    "Biscuit loves the park across the road",
    "Did the move go well?",
    "The movers dropped a box of plates",
]


def conversation_app(tmp_path: Path, name: str, workers: str) -> App:
    settings = Settings(DATABASE_URL=f"sqlite:///{tmp_path / name}", EMBEDDING_PROVIDER="hash", MEMENTO_RECALL_WORKERS=workers)
    app = build_app(settings, embedder=SlowEmbedder(256))
    ctx = CallContext(agent_id="alice", session_id="chat")
    for turn in CONVERSATION:
        app.service.remember(RememberInput(content=turn, topic="chat", type=FragmentType.EPISODE), ctx)
    return app


def test_ranking_reads_ahead_while_the_query_embeds_and_ranks_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    serial, parallel = conversation_app(tmp_path, "s.db", "0"), conversation_app(tmp_path, "p.db", "1")
    try:
        ahead: list[int] = []
        prefetch = ReadAhead.prefetch

        def spy(self: ReadAhead, *args: Any, **kwargs: Any) -> None:
            prefetch(self, *args, **kwargs)
            ahead.append(self.ahead)

        monkeypatch.setattr(ReadAhead, "prefetch", spy)
        ctx = CallContext(agent_id="alice", session_id="chat")
        for question in ("where do they live now", "piano hallway", "what happened to the plates", "park"):
            one = serial.service.recall(RecallInput(text=question, limit=4, includeLinks=False, verbose=True), ctx)
            two = parallel.service.recall(RecallInput(text=question, limit=4, includeLinks=False, verbose=True), ctx)
            assert [(f.content, f.score, f.recall_reason) for f in one.fragments] == [
                (f.content, f.score, f.recall_reason) for f in two.fragments
            ]
        assert len(ahead) == 4 and all(n > 0 for n in ahead)  # only the parallel app read ahead, every time
    finally:
        serial.close()
        parallel.close()


def test_read_ahead_gives_what_the_store_gives_and_reads_each_id_once(tmp_path: Path) -> None:
    app = conversation_app(tmp_path, "r.db", "0")
    try:
        assert app.service.settle(30)  # the background embedding of the writes has nothing left to change
        store, scope, filt = app.store, AgentScope("alice"), SearchFilter()
        ids = [f.id for f in store.recent(scope, filt, 20)]
        asked: list[list[str]] = []
        inner = store.sequence_neighbours

        def counting(scope_: AgentScope, wanted: Any, filt_: SearchFilter, window: timedelta, steps: int = 1) -> Any:
            asked.append(list(wanted))
            return inner(scope_, wanted, filt_, window, steps)

        store.sequence_neighbours = counting  # type: ignore[method-assign, assignment]
        reads = ReadAhead(store, scope, filt)
        window = timedelta(minutes=30)
        unknown = "no-such-memory"
        reads.prefetch(ids[:3], 2, window, stop=lambda: False)
        assert reads.ahead >= 3
        assert len(asked) == 1  # two steps away in one read
        assert reads.sequence_neighbours(scope, ids[:3], filt, window, 2) == inner(scope, ids[:3], filt, window, 2)
        assert len(asked) == 1
        assert reads.sequence_neighbours(scope, [*ids, unknown], filt, window) == inner(scope, [*ids, unknown], filt, window)
        assert reads.rank_features(scope, [*ids, unknown]) == store.rank_features(scope, [*ids, unknown])
        by_id = {f.id: f for f in store.get_many(scope, ids)}
        assert reads.get_many(scope, [*ids, unknown]) == [by_id[i] for i in ids]  # in the order asked, the unknown one left out
        got = reads.embeddings_of(scope, [*ids, unknown])
        want = store.embeddings_of(scope, ids)
        assert got.keys() == want.keys() and all((got[k] == want[k]).all() for k in got)
        before = len(asked)
        reads.sequence_neighbours(scope, [*ids, unknown], filt, window)
        assert len(asked) == before  # every id (the unknown one too) was read once
        flat = [i for call in asked for i in call]
        assert len(flat) == len(set(flat))
        nothing = ReadAhead(store, scope, filt)
        nothing.prefetch(ids, 2, window, stop=lambda: True)
        assert nothing.ahead == 0 and len(asked) == before
    finally:
        app.close()


class CoreFillingEmbedder(HashEmbedder):
    """The hashing embedder saying, as the local model does, whether a query takes every core."""

    def __init__(self, fills: bool) -> None:
        super().__init__(256)
        self.fills = fills
        self.events: list[tuple[str, str]] = []

    def query_fills_cores(self) -> bool:
        return self.fills

    def embed_query(self, text: str) -> Any:
        self.events.append(("embed", threading.current_thread().name))
        return super().embed_query(text)


@pytest.mark.parametrize("fills", [True, False])
def test_a_query_that_fills_the_cores_is_embedded_before_the_other_tiers(tmp_path: Path, fills: bool) -> None:
    # The local model runs a query on every core: beside it the lexical reads would stall its
    # threads at every barrier, so the caller embeds first and only the vector search goes beside.
    # A query that leaves a core free (a remote provider, a fixed thread count) embeds beside.
    serial = build(tmp_path, "serial.db", "0")
    embedder = CoreFillingEmbedder(fills)
    app = build_app(
        Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'ordered.db'}", EMBEDDING_PROVIDER="hash", MEMENTO_RECALL_WORKERS="2"),
        embedder=embedder,
    )
    try:
        ctx = CallContext(agent_id="alice", session_id="s1")
        for content, topic in WRITES:
            app.service.remember(RememberInput(content=content, topic=topic, type=FragmentType.FACT), ctx)
            serial.service.remember(RememberInput(content=content, topic=topic, type=FragmentType.FACT), ctx)
        assert app.service.vectors.query_first() is fills and serial.service.vectors.query_first() is False
        for name in ("text_search", "vector_search"):
            inner = getattr(app.store, name)

            def spy(*args: Any, _inner: Any = inner, _name: str = name, **kwargs: Any) -> Any:
                embedder.events.append((_name, threading.current_thread().name))
                return _inner(*args, **kwargs)

            setattr(app.store, name, spy)
        me = threading.current_thread().name
        for mode in (None, SearchMode.HYBRID):
            embedder.events.clear()
            kw: dict[str, Any] = {"mode": mode} if mode else {}
            assert answers(app, **kw) == answers(serial, **kw)
            embeds = [(i, thread) for i, (what, thread) in enumerate(embedder.events) if what == "embed"]
            texts = [i for i, (what, _) in enumerate(embedder.events) if what == "text_search"]
            assert len(embeds) == len(texts) == len(QUESTIONS)
            vectors = [thread for what, thread in embedder.events if what == "vector_search"]
            assert vectors and all(t.startswith("memento-recall") for t in vectors)  # the vector search beside, either way
            if fills:
                assert all(thread == me for _, thread in embeds)
                assert all(i < t for (i, _), t in zip(embeds, texts))  # each query embedded before its text tier
            else:
                assert all(thread.startswith("memento-recall") for _, thread in embeds)
    finally:
        app.close()
        serial.close()
