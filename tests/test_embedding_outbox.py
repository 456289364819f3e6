"""The embedding outbox (issue 13, defect 5): no write waits for the embedding provider.

A write commits its row without a vector and the service's embedding worker embeds it in the
background; recall finds a not-yet-embedded memory through the keyword tiers, and by meaning
once the worker caught up. The provider here is a real OpenAI-compatible HTTP server started by
the test, which can be told to hold every request far beyond the client's timeout.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest
from prometheus_client.exposition import generate_latest

from memento.app import App, build_app
from memento.embeddings.hashing import HashEmbedder
from memento.embeddings.openai import OpenAICompatibleEmbedder
from memento.embeddings.protocol import EmbeddingFailed
from memento.graph_inputs import CreateEntitiesInput, EntityInput, StoreMemoryInput
from memento.models import AgentScope, AmendInput, CallContext, ChangeEvent, MemoryStatsInput, RecallInput, RememberInput
from memento.ops.metrics import ops_state
from memento.outbox import Pace
from memento.settings import Settings

pytestmark = pytest.mark.backends("sqlite", "postgres")

SYSTEM = AgentScope("system")
DIMENSIONS = 64
HOLD_S = 60.0  # how long the hanging provider holds a request: far beyond the client's timeout
CLIENT_TIMEOUT_S = 2.0


class Provider:
    """A local OpenAI-compatible /v1/embeddings server answering with the hash embedder's vectors;
    `hang()` makes it hold every request until `recover()` (or HOLD_S)."""

    def __init__(self) -> None:
        self.model = HashEmbedder(DIMENSIONS)
        self.release = threading.Event()
        self.release.set()
        self.received = threading.Event()  # a request arrived while hanging
        self.held = 0  # requests being held right now
        self.answered = 0
        self.lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                provider.serve(self, [str(t) for t in body["input"]])

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def serve(self, handler: BaseHTTPRequestHandler, texts: list[str]) -> None:
        if not self.release.is_set():
            with self.lock:
                self.held += 1
            self.received.set()
            self.release.wait(HOLD_S)
            with self.lock:
                self.held -= 1
        vectors = self.model.embed_passages(texts)
        payload = json.dumps({"data": [{"index": i, "embedding": [float(x) for x in v]} for i, v in enumerate(vectors)]}).encode()
        try:
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
        except OSError:
            return  # the client gave up (its timeout) before the answer
        with self.lock:
            self.answered += 1

    def hang(self) -> None:
        self.received.clear()
        self.release.clear()

    def recover(self) -> None:
        self.release.set()

    def embedder(self) -> OpenAICompatibleEmbedder:
        return OpenAICompatibleEmbedder("", base_url=self.url, model="outbox-test", dimensions=DIMENSIONS, timeout_s=CLIENT_TIMEOUT_S)

    def close(self) -> None:
        self.recover()
        self.server.shutdown()
        self.server.server_close()


class Switchable:
    """The hash embedder behind a switch: `down` makes every call fail (a provider outage)."""

    def __init__(self, down: bool = False) -> None:
        self.inner = HashEmbedder(DIMENSIONS)
        self.name = self.inner.name
        self.dimensions = self.inner.dimensions
        self.down = down
        self.gate: threading.Event | None = None  # set: passage calls wait for it
        self.entered = threading.Event()
        self.seconds_a_text = 0.0  # a slow provider: each passage takes this long

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.entered.set()
        if self.gate is not None:
            self.gate.wait(HOLD_S)
        if self.seconds_a_text:
            time.sleep(self.seconds_a_text * len(texts))  # the provider's own time, as a remote one takes it
        if self.down:
            raise EmbeddingFailed("provider unreachable")
        return self.inner.embed_passages(texts)

    def embed_query(self, text: str) -> np.ndarray:
        if self.down:
            raise EmbeddingFailed("provider unreachable")
        return self.inner.embed_query(text)


@pytest.fixture
def provider() -> Iterator[Provider]:
    served = Provider()
    yield served
    served.close()


def remember(app: App, content: str, agent: str | None = None) -> str:
    return app.service.remember(RememberInput(content=content, topic="ops", type="fact", agentId=agent), CallContext()).id


def semantic_hit(app: App, text: str, fragment_id: str, agent: str | None = None) -> bool:
    """Whether recall found `fragment_id` by meaning (the vector tier scored it)."""
    found = app.service.recall(RecallInput(text=text, agentId=agent), CallContext())
    return any(f.id == fragment_id and f.similarity is not None for f in found.fragments)


def pending(app: App) -> set[str]:
    return {fid for _, fid, _ in app.store.missing_embeddings(SYSTEM, 1000)}


def test_a_hanging_provider_never_holds_up_a_write(settings: Settings, provider: Provider) -> None:
    defaults = {"embed_write_wait_ms": 50, "embed_settle_ms": 250}  # the production bounds
    app = build_app(settings.model_copy(update=defaults), embedder=provider.embedder())
    try:
        provider.hang()
        result = app.service.remember(
            RememberInput(content="the billing cron runs at midnight UTC", topic="ops", type="fact"), CallContext()
        )
        # Returned while the provider holds the worker's request: nothing on the write path waited for it.
        assert provider.received.wait(10) and provider.held >= 1 and provider.answered == 0
        assert result.created and result.embedded is False and "pending" in (result.message or "")
        stored = app.service.entities.store_memory(StoreMemoryInput(content="the billing cron pages the on-call"), CallContext())
        entities = app.service.entities.create_entities(
            CreateEntitiesInput(entities=[EntityInput(name="billing", entity_type="project")]), CallContext()
        )
        assert stored.created and entities.created == 1 and provider.answered == 0
        assert app.service.memory_stats(MemoryStatsInput(), CallContext()).embeddings_pending == 2
        # Not embedded yet: the keyword tiers find it (the query's own embedding times out meanwhile).
        found = app.service.recall(RecallInput(text="billing cron midnight"), CallContext())
        assert result.id in [f.id for f in found.fragments]

        provider.recover()
        assert app.service.settle(30)  # the worker tries again and stores the vectors
        assert pending(app) == set()
        assert semantic_hit(app, "billing cron midnight", result.id)
        assert app.service.memory_stats(MemoryStatsInput(), CallContext()).embeddings_pending == 0
        assert all(e.has_embedding for e in app.store.entities_named(SYSTEM, ["billing"]))
    finally:
        provider.recover()
        app.close()


def test_rows_written_during_an_outage_survive_a_restart_and_are_embedded_after_it(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    down = Switchable(down=True)
    app = build_app(settings.model_copy(update={"embed_drain_s": 2.0}), embedder=down)
    ids = [remember(app, f"outage note {i} about the ingest queue") for i in range(3)]
    assert not app.service.settle(5)  # the provider still fails: the rows stay pending
    with caplog.at_level(logging.WARNING, logger="memento.outbox"):
        app.close()
    assert "pending" in caplog.text
    still_down = build_app(settings, embedder=Switchable(down=True))
    try:
        assert set(ids) <= pending(still_down)  # a new process finds them pending
    finally:
        still_down.close()

    again = build_app(settings, embedder=Switchable())
    try:
        assert again.service.settle(30)  # the worker's first round sweeps what the last process left
        assert pending(again) == set()
        assert semantic_hit(again, "ingest queue outage note", ids[0])
    finally:
        again.close()


def test_the_worker_embeds_every_namespace_and_hands_nothing_to_anyone(settings: Settings) -> None:
    embedder = Switchable(down=True)
    app = build_app(settings, embedder=embedder)
    events: list[ChangeEvent] = []
    try:
        mine = remember(app, "agent a keeps the deploy key in the vault", "agent-a")
        theirs = remember(app, "agent b rotates the deploy key weekly", "agent-b")
        shared = remember(app, "the deploy key is an ed25519 key")
        assert not app.service.settle(2) and pending(app) == {mine, theirs, shared}
        app.service.add_listener(events.append)
        embedder.down = False
        assert app.service.settle(30)
        assert pending(app) == set() and events == []  # the worker's writes announce nothing
        for agent, fid in (("agent-a", mine), ("agent-b", theirs), ("default", shared)):  # each row its own text's vector
            scope = AgentScope(agent)
            stored = app.store.get_many(scope, [fid])[0]
            assert np.allclose(app.store.embeddings_of(scope, [fid])[fid], embedder.inner.embed_passages([stored.content])[0])
        # Each namespace still sees only its own (and the shared pool's) memories.
        seen_by_a = {f.id for f in app.service.recall(RecallInput(text="deploy key", agentId="agent-a"), CallContext()).fragments}
        assert mine in seen_by_a and shared in seen_by_a and theirs not in seen_by_a
    finally:
        app.close()


def test_recall_right_after_a_write_finds_it_by_meaning(settings: Settings) -> None:
    app = build_app(settings, embedder=Switchable())
    try:
        fid = remember(app, "the staging database is restored every sunday", "agent-r")
        assert semantic_hit(app, "staging database restored", fid, "agent-r")  # the recall waited for its own write
    finally:
        app.close()


def test_a_vector_of_text_amended_meanwhile_is_never_stored(settings: Settings) -> None:
    embedder = Switchable()
    embedder.gate = threading.Event()
    app = build_app(settings, embedder=embedder)
    try:
        embedder.entered.clear()
        fid = remember(app, "the cache ttl is five minutes")
        assert embedder.entered.wait(10)  # the worker is embedding the first text
        app.service.amend(AmendInput(id=fid, content="the cache ttl is ten minutes"), CallContext())
        embedder.gate.set()
        assert app.service.settle(30)
        vector = app.store.embeddings_of(AgentScope("default"), [fid])[fid]
        assert np.allclose(vector, embedder.inner.embed_passages(["the cache ttl is ten minutes"])[0])
    finally:
        embedder.gate.set()
        app.close()


def test_metrics_show_pending_embeddings_and_the_worker_batches(settings: Settings) -> None:
    app = build_app(settings, embedder=Switchable())
    try:
        state = ops_state(app)
        remember(app, "metrics see the embedding worker")
        assert app.service.settle(30)
        text = generate_latest(state.registry).decode()
        assert "memento_embeddings_pending 0.0" in text
        assert 'memento_embedding_batch_duration_seconds_count{outcome="ok"}' in text
    finally:
        app.close()


def test_a_recall_waits_for_a_write_it_can_see_embedded_in_time_not_for_a_backlog(settings: Settings) -> None:
    embedder = Switchable()
    embedder.seconds_a_text = 0.5
    app = build_app(settings, embedder=embedder)
    outbox, agents = app.service.outbox, ("default",)
    waited: list[bool] = []
    try:
        embedder.gate = threading.Event()
        remember(app, "the first note shows the worker its pace")
        assert embedder.entered.wait(10)  # the worker holds a batch of one
        for i in range(4):
            remember(app, f"warm-up note {i} for a batch of four")
        embedder.gate.set()
        assert app.service.settle(30)  # batches of one and four rows: half a second a row, no fixed cost
        embedder.gate, embedder.entered = threading.Event(), threading.Event()
        one = remember(app, "the nightly export lands in the archive bucket")
        assert embedder.entered.wait(10)  # the worker holds it
        waiting = threading.Thread(target=lambda: waited.append(outbox.settle(agents, 8.0)))
        waiting.start()
        embedder.gate.set()
        waiting.join(30)
        assert waited == [True]  # one row, due well within the wait: the recall waits and sees it
        assert semantic_hit(app, "nightly export archive bucket", one)

        embedder.gate, embedder.entered = threading.Event(), threading.Event()
        backlog = [remember(app, f"backlog note {i} about the ingest queue") for i in range(20)]
        assert embedder.entered.wait(10)
        waiting = threading.Thread(target=lambda: waited.append(outbox.settle(agents, 8.0)))
        waiting.start()
        waiting.join(4)  # twenty rows at half a second each cannot be embedded in the 8 s it may wait:
        assert not waiting.is_alive() and waited == [True, False]  # it went on at once
        found = app.service.recall(RecallInput(text="backlog note 19 ingest queue"), CallContext())
        assert backlog[19] in [f.id for f in found.fragments]  # by its words meanwhile
        embedder.gate.set()
        assert app.service.settle(60) and semantic_hit(app, "backlog note 19 ingest queue", backlog[19])
    finally:
        if embedder.gate is not None:
            embedder.gate.set()
        app.close()


def test_the_pace_tells_a_providers_fixed_cost_a_call_from_its_cost_a_row() -> None:
    remote, local, unknown = Pace(), Pace(), Pace()
    assert unknown.seconds(5) is None  # nothing embedded yet: no reason to give up waiting
    for rows, seconds in ((1, 0.2), (3, 0.21), (1, 0.19), (6, 0.2)):
        remote.add(rows, seconds)  # a remote provider: the call costs, the rows hardly
    for rows in (1, 3, 64, 20, 64):
        local.add(rows, 0.008 * rows)  # the local model: every row costs the same
    assert remote.seconds(2) == pytest.approx(0.2, abs=0.02) and (remote.seconds(60) or 0) < 0.5  # not sixty calls' worth (12 s)
    assert local.seconds(2) == pytest.approx(0.016, abs=0.002) and local.seconds(100) == pytest.approx(0.8, abs=0.02)
    one_size = Pace()
    one_size.add(1, 0.2)
    assert one_size.seconds(3) == pytest.approx(0.2)  # a call or three rows? the optimistic reading: one call
