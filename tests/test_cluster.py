"""The Redis-backed pieces that let replicas share MCP sessions (mcp/cluster.py, mcp/cluster_store.py, storage/redis_bus.py)."""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from typing import Any

import pytest
from redis_harness import RedisServer, redis_server  # noqa: F401  (fixture)

from memento.auth.principal import Principal
from memento.mcp.cluster import RedisEventStore, RedisSessionDirectory
from memento.mcp.context import Session
from memento.models import ChangeEvent
from memento.settings import Settings
from memento.storage.redis import connect
from memento.storage.redis_bus import RedisBus


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[Any]:
    c = connect(Settings(REDIS_ENABLED=True, REDIS_HOST="127.0.0.1", REDIS_PORT=redis_server.port))
    yield c
    c.close()


def test_events_resume_in_order_per_stream_from_any_store(client: Any) -> None:
    here, there = RedisEventStore(client, ttl_s=60), RedisEventStore(client, ttl_s=60)
    priming = here.append("s1", "post-1", None)
    first = here.append("s1", "post-1", {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}})
    other = here.append("s1", "standalone", {"jsonrpc": "2.0", "method": "notifications/resources/list_changed"})
    last = here.append("s1", "post-1", {"jsonrpc": "2.0", "id": 3, "result": {}})
    assert len({priming, first, other, last}) == 4
    # Another replica's store finds the stream of an id and replays what came after it.
    assert there.stream_of("s1", first) == "post-1"
    assert there.stream_of("s1", other) == "standalone"
    assert [(e.id, e.message) for e in there.after("s1", "post-1", priming)] == [
        (first, {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}),
        (last, {"jsonrpc": "2.0", "id": 3, "result": {}}),
    ]
    assert [e.id for e in there.after("s1", "post-1", None)] == [priming, first, last]
    assert there.after("s2", "post-1", None) == []
    here.drop_stream("s1", "post-1")
    assert there.stream_of("s1", first) is None
    assert [e.id for e in there.after("s1", "standalone", None)] == [other]
    there.drop_session("s1")
    assert here.after("s1", "standalone", None) == []


def test_events_fall_back_to_memory_while_redis_is_down(client: Any, redis_server: RedisServer) -> None:
    store = RedisEventStore(client, ttl_s=60)
    redis_server.stop()
    try:
        first = store.append("s1", "standalone", None)
        second = store.append("s1", "standalone", {"jsonrpc": "2.0", "method": "notifications/message", "params": {}})
        assert store.stream_of("s1", first) == "standalone"
        assert [e.id for e in store.after("s1", "standalone", first)] == [second]
    finally:  # the fixture's server is shared by the rest of the test: never leave it down
        redis_server.start()


class FakeBus:
    """Records what a directory tells the other replicas (the real bus is tested below)."""

    def __init__(self, replica_id: str) -> None:
        self.replica_id = replica_id
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def publish(self, channel: str, payload: dict[str, Any]) -> bool:
        self.sent.append((channel, payload))
        return True

    def on(self, channel: str, handler: Any) -> None:
        pass


def test_a_session_saved_by_one_replica_is_continued_by_another(client: Any) -> None:
    bus_a, bus_b = FakeBus("a"), FakeBus("b")
    a, b = RedisSessionDirectory(client, bus_a, ttl_s=60), RedisSessionDirectory(client, bus_b, ttl_s=60)
    owner = Principal(subject="alice", agent_id="alice", read_only=True, scopes=frozenset({"memory:read"}), kind="oauth")
    session = Session(
        id="sid-1",
        protocol_version="2025-06-18",
        client_info={"name": "c"},
        client_capabilities={"sampling": {}},
        initialized=True,
        principal=owner,
    )
    a.register(session)
    copy = b.load("sid-1")
    assert copy is not None and copy is not session
    assert (copy.principal, copy.protocol_version, copy.client_capabilities, copy.initialized) == (
        owner,
        "2025-06-18",
        {"sampling": {}},
        True,
    )
    assert copy.delivers is False  # A created it, so A delivers its notifications
    assert b.load("unknown") is None

    copy.log_level = "debug"
    copy.state["resources/subscriptions"] = ["memory://stats"]
    b.sync(copy)
    assert bus_b.sent == [("sessions", {"op": "changed", "id": "sid-1"})]
    again = a.load("sid-1")
    assert again is not None and again.log_level == "debug"
    assert again.state == {"resources/subscriptions": ["memory://stats"]}
    assert again.delivers is True
    b.sync(copy)  # nothing changed: nothing announced
    assert len(bus_b.sent) == 1

    b.claim(copy)
    assert bus_b.sent[-1] == ("sessions", {"op": "claimed", "id": "sid-1", "home": "b"})
    assert a.load("sid-1").delivers is False  # type: ignore[union-attr]

    assert a.alive("sid-1")
    a.remove("sid-1")
    assert not b.alive("sid-1") and b.load("sid-1") is None
    assert bus_a.sent[-1] == ("sessions", {"op": "closed", "id": "sid-1"})


def test_a_session_record_expires_after_the_ttl_unless_touched(client: Any) -> None:
    ttl_s = 2
    directory = RedisSessionDirectory(client, FakeBus("a"), ttl_s=ttl_s, touch_every_s=0.1)
    touched, left = Session(id="sid-touched"), Session(id="sid-left")
    directory.register(touched)
    directory.register(left)
    registered = time.monotonic()
    assert 0 < client.ttl("memento:mcp:session:sid-left") <= ttl_s

    # Touch one (an unchanged sync refreshes the expiry) and not the other, until the other is
    # gone and the touched one has outlived its first ttl twice over.
    deadline = registered + 10 * ttl_s
    while directory.alive("sid-left") or time.monotonic() - registered < 2 * ttl_s:
        assert time.monotonic() < deadline, "the untouched record never expired"
        directory.sync(touched)
        assert directory.alive("sid-touched"), "a touched record expired"
        time.sleep(0.05)  # the polling step, not a timing assertion
    assert directory.load("sid-left") is None
    assert directory.load("sid-touched") is not None

    # Once nobody touches it, the touched record expires too.
    while directory.alive("sid-touched"):
        assert time.monotonic() < deadline + 10 * ttl_s, "the record outlived its ttl without touches"
        time.sleep(0.05)


def test_the_bus_carries_changes_between_replicas_but_not_back_to_the_sender(client: Any, redis_server: RedisServer) -> None:
    settings = Settings(REDIS_ENABLED=True, REDIS_HOST="127.0.0.1", REDIS_PORT=redis_server.port)
    one, two = RedisBus(connect(settings)), RedisBus(connect(settings))
    heard_one: queue.Queue[ChangeEvent] = queue.Queue()
    heard_two: queue.Queue[ChangeEvent] = queue.Queue()
    one.on_change(heard_one.put)
    two.on_change(heard_two.put)
    for bus in (one, two):
        bus.start()
        assert bus.wait_subscribed()
    try:
        event = ChangeEvent("created", "alice", ("frag-1",), ("deploys",), "sid-9")
        deadline = time.monotonic() + 10
        while heard_two.empty():  # a subscription can take a moment to be active server-side
            one.publish_change(event)
            assert time.monotonic() < deadline, "the other replica never heard the change"
            time.sleep(0.1)
        assert heard_two.get() == event
        assert heard_one.empty()
    finally:
        one.close()
        two.close()


# ---------------------------------------------------------------- tasks across replicas


@pytest.fixture
def two_apps(tmp_path: Any, redis_server: RedisServer) -> Iterator[tuple[Any, Any]]:
    from memento.app import build_app

    apps = [
        build_app(
            Settings(
                DATABASE_URL=f"sqlite:///{tmp_path / name}.db",
                EMBEDDING_PROVIDER="hash",
                REDIS_ENABLED=True,
                REDIS_HOST="127.0.0.1",
                REDIS_PORT=redis_server.port,
            )
        )
        for name in ("a", "b")
    ]
    for app in apps:
        assert app.bus is not None and app.bus.wait_subscribed()
    yield apps[0], apps[1]
    for app in apps:
        app.close()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_task_started_on_one_replica_is_polled_awaited_and_cancelled_through_another(
    two_apps: tuple[Any, Any], anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import anyio
    from mcp_fakes import FakeContext, FakeHub, FakeSession

    from memento.mcp.jsonrpc import JsonRpcError
    from memento.mcp.tasks import RELATED_TASK, TasksFeature

    app_a, app_b = two_apps
    on_a, on_b = FakeSession("s1"), FakeSession("s1")  # one MCP session, a copy on each replica
    here, there = TasksFeature(), TasksFeature()
    here.attach(FakeHub(app_a, [on_a]))
    there.attach(FakeHub(app_b, [on_b]))
    here.started()
    there.started()

    async def call(feature: TasksFeature, session: FakeSession, method: str, **params: Any) -> dict[str, Any]:
        return await feature.handlers()[method](FakeContext(session), params)

    released, cancelled = anyio.Event(), anyio.Event()

    async def slow() -> dict[str, Any]:
        try:
            await released.wait()
        except BaseException:
            cancelled.set()
            raise
        return {"content": [{"type": "text", "text": "consolidated"}], "isError": False}

    created = await here.maybe_run_as_task(FakeContext(on_a), "memory_consolidate", {"task": {"ttl": 60000}}, slow)
    assert created is not None
    task_id = created["task"]["taskId"]
    assert (await call(there, on_b, "tasks/get", taskId=task_id))["status"] == "working"
    assert [t["taskId"] for t in (await call(there, on_b, "tasks/list"))["tasks"]] == [task_id]
    with pytest.raises(JsonRpcError):  # another session, even on the same replica, does not see it
        await call(there, FakeSession("s2"), "tasks/get", taskId=task_id)

    async with anyio.create_task_group() as group:
        results: list[dict[str, Any]] = []

        async def wait_result() -> None:
            results.append(await call(there, on_b, "tasks/result", taskId=task_id))

        group.start_soon(wait_result)
        # B does not run the task: its tasks/result polls the shared record. Wait until it has
        # read that record twice (so it saw "working" and went on waiting), then check that it
        # is still pending and that the task is still working on both replicas.
        assert there.board is not None
        polls: list[str] = []
        polled_twice = anyio.Event()
        load = there.board.load

        def counting_load(tid: str) -> dict[str, Any] | None:
            polls.append(tid)
            if len(polls) >= 2:
                polled_twice.set()
            return load(tid)

        monkeypatch.setattr(there.board, "load", counting_load)
        with anyio.fail_after(10):
            await polled_twice.wait()
        assert not results  # still awaiting the result
        assert (await call(here, on_a, "tasks/get", taskId=task_id))["status"] == "working"
        assert (await call(there, on_b, "tasks/get", taskId=task_id))["status"] == "working"
        released.set()
    assert results[0]["content"][0]["text"] == "consolidated"
    assert results[0]["_meta"][RELATED_TASK] == {"taskId": task_id}

    # A second task, cancelled through B: A stops running it and both say cancelled.
    released = anyio.Event()
    created = await here.maybe_run_as_task(FakeContext(on_a), "memory_consolidate", {"task": {}}, slow)
    assert created is not None
    second = created["task"]["taskId"]
    assert (await call(there, on_b, "tasks/cancel", taskId=second))["status"] == "cancelled"
    with anyio.fail_after(10):
        await cancelled.wait()
    assert (await call(here, on_a, "tasks/get", taskId=second))["status"] == "cancelled"
    with pytest.raises(JsonRpcError) as err:
        await call(here, on_a, "tasks/cancel", taskId=second)
    assert "already cancelled" in err.value.message
    listed = (await call(there, on_b, "tasks/list"))["tasks"]
    assert [(t["taskId"], t["status"]) for t in listed] == [(task_id, "completed"), (second, "cancelled")]


def test_closing_the_bus_while_its_listener_is_blocked_in_a_read_raises_nothing(client: Any) -> None:
    # close() shuts the pubsub connection under the listener's blocked read; any exception that
    # escapes the bus thread fails this test (pytest turns unhandled thread exceptions into errors).
    for _ in range(30):
        bus = RedisBus(client)
        bus.start()
        assert bus.wait_subscribed()
        bus.close()
        assert bus._thread is not None and not bus._thread.is_alive()
