"""Tasks (2025-11-25): task-augmented tool calls, polling, results, listing, cancellation."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp_fakes import FakeContext, FakeHub, FakeSession

from memento.app import App
from memento.mcp.jsonrpc import JsonRpcError
from memento.mcp.tasks import RELATED_TASK, TasksFeature, tool_execution

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Gate:
    """A tool run that waits until released, then returns `result` (or raises `error`)."""

    def __init__(self, result: dict[str, Any] | None = None, error: Exception | None = None) -> None:
        self.started, self.release = anyio.Event(), anyio.Event()
        self.result = result or {"content": [{"type": "text", "text": "done"}], "isError": False}
        self.error = error

    async def __call__(self) -> dict[str, Any]:
        self.started.set()
        await self.release.wait()
        if self.error:
            raise self.error
        return self.result


def setup(app: App, *sessions: FakeSession, page_size: int = 50) -> TasksFeature:
    feature = TasksFeature(page_size=page_size)
    feature.attach(FakeHub(app, sessions))
    return feature


async def call(feature: TasksFeature, ctx: FakeContext, method: str, **params: Any) -> dict[str, Any]:
    return await feature.handlers()[method](ctx, params)


async def start(feature: TasksFeature, ctx: FakeContext, gate: Gate, tool: str = "memory_consolidate", ttl: int | None = 60000) -> str:
    task: dict[str, Any] = {} if ttl is None else {"ttl": ttl}
    created = await feature.maybe_run_as_task(ctx, tool, {"name": tool, "arguments": {}, "task": task}, gate)
    assert created is not None
    assert created["task"]["status"] == "working"
    return str(created["task"]["taskId"])


def test_capability_and_tool_execution_exist_only_from_2025_11_25(app: App) -> None:
    feature = setup(app)
    assert feature.capabilities("2025-06-18") == {}
    assert feature.capabilities("2025-11-25") == {"tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}}
    assert tool_execution("2025-11-25", "memory_consolidate") == {"taskSupport": "optional"}
    assert tool_execution("2025-11-25", "reflect") == {"taskSupport": "optional"}
    assert tool_execution("2025-11-25", "forget") is None
    assert tool_execution("2025-06-18", "memory_consolidate") is None


async def test_a_call_without_task_runs_normally(app: App) -> None:
    session = FakeSession("s1")
    assert await setup(app, session).maybe_run_as_task(FakeContext(session), "memory_consolidate", {"name": "x"}, Gate()) is None


async def test_older_sessions_ignore_the_task_field(app: App) -> None:
    session = FakeSession("s1", protocol_version="2025-06-18")
    params = {"name": "memory_consolidate", "task": {}}
    assert await setup(app, session).maybe_run_as_task(FakeContext(session), "memory_consolidate", params, Gate()) is None


async def test_a_tool_without_task_support_is_method_not_found(app: App) -> None:
    session = FakeSession("s1")
    with pytest.raises(JsonRpcError) as err:
        await setup(app, session).maybe_run_as_task(FakeContext(session), "forget", {"task": {}}, Gate())
    assert err.value.code == -32601


async def test_lifecycle_working_then_completed_with_the_tool_result(app: App) -> None:
    session = FakeSession("s1")
    feature, ctx = setup(app, session), FakeContext(session)
    gate = Gate()
    task_id = await start(feature, ctx, gate)
    await gate.started.wait()
    polled = await call(feature, ctx, "tasks/get", taskId=task_id)
    assert polled["status"] == "working" and polled["ttl"] == 60000 and polled["pollInterval"] > 0
    assert polled["createdAt"].endswith("Z") and polled["lastUpdatedAt"]
    gate.release.set()
    result = await call(feature, ctx, "tasks/result", taskId=task_id)  # blocks until done
    assert result["content"] == [{"type": "text", "text": "done"}]
    assert result["_meta"][RELATED_TASK] == {"taskId": task_id}
    assert (await call(feature, ctx, "tasks/get", taskId=task_id))["status"] == "completed"
    (status,) = await session.wait_for("notifications/tasks/status")
    assert status["taskId"] == task_id and status["status"] == "completed"


async def test_ttl_is_always_present_and_clamped(app: App) -> None:
    session = FakeSession("s1")
    feature, ctx = setup(app, session), FakeContext(session)
    default_id = await start(feature, ctx, Gate(), ttl=None)
    short_id = await start(feature, ctx, Gate(), ttl=1)
    assert (await call(feature, ctx, "tasks/get", taskId=default_id))["ttl"] == 15 * 60 * 1000
    assert (await call(feature, ctx, "tasks/get", taskId=short_id))["ttl"] == 10_000


async def test_an_is_error_result_fails_the_task_but_is_still_returned(app: App) -> None:
    session = FakeSession("s1")
    feature, ctx = setup(app, session), FakeContext(session)
    gate = Gate(result={"content": [{"type": "text", "text": "Error (x): y"}], "isError": True})
    task_id = await start(feature, ctx, gate)
    gate.release.set()
    assert (await call(feature, ctx, "tasks/result", taskId=task_id))["isError"] is True
    assert (await call(feature, ctx, "tasks/get", taskId=task_id))["status"] == "failed"


async def test_a_json_rpc_error_is_what_tasks_result_returns(app: App) -> None:
    session = FakeSession("s1")
    feature, ctx = setup(app, session), FakeContext(session)
    gate = Gate(error=JsonRpcError(-32602, "bad arguments"))
    task_id = await start(feature, ctx, gate)
    gate.release.set()
    with pytest.raises(JsonRpcError) as err:
        await call(feature, ctx, "tasks/result", taskId=task_id)
    assert (err.value.code, err.value.message) == (-32602, "bad arguments")


async def test_tasks_belong_to_their_session(app: App) -> None:
    mine, other = FakeSession("s1"), FakeSession("s2")
    feature = setup(app, mine, other)
    task_id = await start(feature, FakeContext(mine), Gate())
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        with pytest.raises(JsonRpcError) as err:
            await call(feature, FakeContext(other), method, taskId=task_id)
        assert err.value.code == -32602
    assert (await call(feature, FakeContext(other), "tasks/list"))["tasks"] == []


async def test_unknown_task_ids_are_invalid_params(app: App) -> None:
    session = FakeSession("s1")
    for params in ({"taskId": "nope"}, {}):
        with pytest.raises(JsonRpcError) as err:
            await setup(app, session).handlers()["tasks/get"](FakeContext(session), params)
        assert err.value.code == -32602


async def test_list_pages_the_sessions_tasks_in_creation_order(app: App) -> None:
    session = FakeSession("s1")
    feature, ctx = setup(app, session, page_size=2), FakeContext(session)
    ids = [await start(feature, ctx, Gate()) for _ in range(5)]
    seen: list[str] = []
    page = await call(feature, ctx, "tasks/list")
    while True:
        seen += [t["taskId"] for t in page["tasks"]]
        if "nextCursor" not in page:
            break
        page = await call(feature, ctx, "tasks/list", cursor=page["nextCursor"])
    assert seen == ids
    with pytest.raises(JsonRpcError) as err:
        await call(feature, ctx, "tasks/list", cursor="bogus")
    assert err.value.code == -32602


async def test_cancel_stops_a_working_task_and_refuses_a_finished_one(app: App) -> None:
    session = FakeSession("s1")
    feature, ctx = setup(app, session), FakeContext(session)
    gate = Gate()
    task_id = await start(feature, ctx, gate)
    await gate.started.wait()
    cancelled = await call(feature, ctx, "tasks/cancel", taskId=task_id)
    assert cancelled["status"] == "cancelled"
    assert (await call(feature, ctx, "tasks/get", taskId=task_id))["status"] == "cancelled"
    with pytest.raises(JsonRpcError) as err:
        await call(feature, ctx, "tasks/cancel", taskId=task_id)
    assert err.value.code == -32602
    with pytest.raises(JsonRpcError):
        await call(feature, ctx, "tasks/result", taskId=task_id)


async def test_tasks_of_closed_sessions_are_dropped(app: App) -> None:
    session = FakeSession("s1")
    hub = FakeHub(app, [session])
    feature = TasksFeature()
    feature.attach(hub)
    gate = Gate()
    task_id = await start(feature, FakeContext(session), gate)
    hub.live.clear()
    assert task_id not in {t["taskId"] for t in (await call(feature, FakeContext(session), "tasks/list"))["tasks"]}


async def test_a_malformed_task_field_is_invalid_params(app: App) -> None:
    session = FakeSession("s1")
    feature = setup(app, session)
    for task in ("soon", {"ttl": "long"}, {"ttl": -1}):
        with pytest.raises(JsonRpcError) as err:
            await feature.maybe_run_as_task(FakeContext(session), "reflect", {"task": task}, Gate())
        assert err.value.code == -32602
