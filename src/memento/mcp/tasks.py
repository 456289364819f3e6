"""MCP tasks (2025-11-25, experimental): bulk tools run in the background and are polled.

A `tools/call` carrying `params.task` for a tool whose `execution.taskSupport` allows it is
answered at once with a CreateTaskResult; the tool runs on; `tasks/get` polls it,
`tasks/result` blocks until it ends and returns exactly what the call would have returned,
`tasks/list` pages the session's tasks and `tasks/cancel` stops one. Task ids are bound to
the session that created them (another session gets "not found"), every task carries a
`ttl`, and expired tasks are purged lazily.

The core's tools/call path calls `TasksFeature.maybe_run_as_task` before running a tool, and
`tool_execution` when it lists tools.

At 2026-07-28 the same feature speaks the `io.modelcontextprotocol/tasks` extension instead
(task_extension.py): server-directed tasks owned by the caller's credential, tasks/get with
the outcome inlined, tasks/update for input, no tasks/list or tasks/result.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import anyio

from memento.mcp import mrtr, versions
from memento.mcp import task_extension as ext
from memento.mcp.features import Handler, NotificationHandler, RequestContext, ServerHub
from memento.mcp.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, JsonRpcError
from memento.mcp.paging import decode_cursor, encode_cursor

if TYPE_CHECKING:
    from memento.mcp.cluster_store import RedisTaskBoard

log = logging.getLogger(__name__)

TASKS_VERSION = "2025-11-25"
RELATED_TASK = "io.modelcontextprotocol/related-task"
IMMEDIATE_RESPONSE = "io.modelcontextprotocol/model-immediate-response"
TASK_SUPPORT: Mapping[str, str] = {"memory_consolidate": "optional", "reflect": "optional", "remember": "optional", "recall": "optional"}
"""Tools that may run as tasks, with their `execution.taskSupport`; every other tool: forbidden.
(forget is left out: its confirmation would need the input_required flow.)"""
DEFAULT_TTL_MS = 15 * 60 * 1000
MIN_TTL_MS = 10 * 1000
MAX_TTL_MS = 24 * 60 * 60 * 1000
POLL_INTERVAL_MS = 500
PAGE_SIZE = 50
TERMINAL = frozenset({"completed", "failed", "cancelled"})

ToolRun = Callable[..., Awaitable[dict[str, Any]]]
"""Runs the call: with no argument (2025-11-25), or with the `TaskContext` the tool gets (2026)."""


def supports_tasks(version: str) -> bool:
    return versions.at_least(version, TASKS_VERSION)


def tool_execution(version: str, tool_name: str) -> dict[str, Any] | None:
    """The `execution` member of a tools/list entry, or None when the version has none."""
    support = TASK_SUPPORT.get(tool_name)
    if support is None or not supports_tasks(version) or ext.applies(version):  # 2026's Tool has no execution
        return None
    return {"taskSupport": support}


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(eq=False)
class TaskRecord:
    """One task and, once it ends, the outcome of its request."""

    id: str
    session_id: str
    seq: int
    ttl_ms: int
    created_at: datetime = field(default_factory=_now)
    updated_at: datetime = field(default_factory=_now)
    status: str = "working"
    status_message: str | None = "The operation is in progress."
    result: dict[str, Any] | None = None
    error: JsonRpcError | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    runner: asyncio.Task[None] | None = None
    owner: str | None = None  # 2026: the credential it belongs to (no session); None: a 2025-11-25 task
    input_requests: dict[str, dict[str, Any]] = field(default_factory=dict)  # 2026: pending, by key
    context: ext.TaskContext | None = None  # 2026, on the replica running it: where tasks/update lands

    @property
    def poll_ms(self) -> int:
        return POLL_INTERVAL_MS

    def touch(self, *, status: str | None = None, status_message: str | None = None) -> None:
        """A change short of the end (input_required and back, progress)."""
        if status is not None:
            self.status = status
        if status_message is not None:
            self.status_message = status_message
        self.updated_at = _now()

    def view(self) -> dict[str, Any]:
        task: dict[str, Any] = {
            "taskId": self.id,
            "status": self.status,
            "createdAt": _iso(self.created_at),
            "lastUpdatedAt": _iso(self.updated_at),
            "ttl": self.ttl_ms,
        }
        if self.status_message:
            task["statusMessage"] = self.status_message
        if self.status not in TERMINAL:
            task["pollInterval"] = POLL_INTERVAL_MS
        return task

    def wire(self) -> dict[str, Any]:
        """The record as JSON, for the replicas that did not create it (mcp/cluster_store.py)."""
        error = None
        if self.error is not None:
            error = {"code": self.error.code, "message": self.error.message, "data": self.error.data}
        return {
            "taskId": self.id,
            "sessionId": self.session_id,
            "seq": self.seq,
            "ttl": self.ttl_ms,
            "createdAt": self.created_at.isoformat(),
            "updatedAt": self.updated_at.isoformat(),
            "status": self.status,
            "statusMessage": self.status_message,
            "result": self.result,
            "error": error,
            "owner": self.owner,
            "inputRequests": self.input_requests,
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> TaskRecord:
        record = cls(
            str(data["taskId"]),
            str(data["sessionId"]),
            int(data["seq"]),
            int(data["ttl"]),
            created_at=datetime.fromisoformat(data["createdAt"]),
            updated_at=datetime.fromisoformat(data["updatedAt"]),
            status=str(data["status"]),
            status_message=data.get("statusMessage"),
            result=data.get("result"),
            owner=data.get("owner"),
            input_requests=dict(data.get("inputRequests") or {}),
        )
        error = data.get("error")
        if isinstance(error, dict):
            record.error = JsonRpcError(int(error["code"]), str(error["message"]), data=error.get("data"))
        if record.status in TERMINAL:
            record.done.set()
        return record

    def expired(self, now: datetime) -> bool:
        return now >= self.created_at + timedelta(milliseconds=self.ttl_ms)

    def finish(self, status: str, message: str | None) -> bool:
        """Move to a terminal status; False when already terminal (a cancelled task stays so)."""
        if self.status in TERMINAL:
            return False
        self.status, self.status_message, self.updated_at = status, message, _now()
        self.done.set()
        return True


def _requested_ttl(task: Any) -> int:
    if not isinstance(task, dict):
        raise JsonRpcError(INVALID_PARAMS, "Invalid params: task must be an object")
    ttl = task.get("ttl")
    if ttl is None:
        return DEFAULT_TTL_MS
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or ttl < 0:
        raise JsonRpcError(INVALID_PARAMS, "Invalid params: task.ttl must be a non-negative number")
    return int(min(max(ttl, MIN_TTL_MS), MAX_TTL_MS))


class TasksFeature:
    """Task-augmented tools/call plus tasks/get, tasks/result, tasks/list, tasks/cancel."""

    def __init__(self, page_size: int = PAGE_SIZE) -> None:
        self.page_size = page_size
        self.tasks: dict[str, TaskRecord] = {}  # the tasks this process runs (or ran)
        self._seq = 0
        self._hub: ServerHub | None = None
        self.board: RedisTaskBoard | None = None  # with Redis: the records every replica sees
        self._loop: asyncio.AbstractEventLoop | None = None
        self.support: dict[str, str] = dict(ext.TASK_SUPPORT)  # 2026: tools run as tasks (+ fixtures)
        self.gatherers: dict[str, ext.Gatherer] = {}  # 2026: MRTR rounds before a tool's task
        self._notes: set[asyncio.Task[None]] = set()  # 2026 status notifications being delivered

    def add_task_tool(self, name: str, support: str, gather: ext.Gatherer | None = None) -> None:
        """Run `name` as a task at 2026 ("optional": when the client opted in; "required": refuse
        clients that did not), after `gather` found the input it needs (conformance fixtures)."""
        self.support[name] = support
        if gather is not None:
            self.gatherers[name] = gather

    # ------------------------------------------------------------ contract

    def capabilities(self, version: str) -> dict[str, Any]:
        if ext.applies(version):
            return {"extensions": {ext.EXTENSION: {}}}
        if not supports_tasks(version):
            return {}
        return {"tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}}

    def handlers(self) -> Mapping[str, Handler]:
        return {
            "tasks/get": self._get,
            "tasks/result": self._result,
            "tasks/list": self._list,
            "tasks/cancel": self._cancel,
            "tasks/update": self._update,
        }

    def notification_handlers(self) -> Mapping[str, NotificationHandler]:
        return {}

    def attach(self, hub: ServerHub) -> None:
        self._hub = hub
        bus, redis = hub.app.bus, hub.app.redis
        if bus is not None and redis is not None:
            from memento.mcp.cluster_store import TASKS_CHANNEL, RedisTaskBoard

            self.board = RedisTaskBoard(redis.loop, bus)  # the app's event-loop client
            bus.on(TASKS_CHANNEL, self._on_replica_message)

    def started(self) -> None:
        self._loop = asyncio.get_running_loop()

    def _on_replica_message(self, payload: dict[str, Any]) -> None:
        """Another replica cancelled a task this one runs (bus thread: hop to the loop)."""
        loop, op = self._loop, payload.get("op")
        if op not in ("cancel", "update") or loop is None or loop.is_closed():
            return
        task_id = str(payload.get("taskId"))
        responses = payload.get("inputResponses")
        try:
            if op == "cancel":
                loop.call_soon_threadsafe(self._cancel_here, task_id)
            elif isinstance(responses, dict):
                loop.call_soon_threadsafe(self._answer_here, task_id, responses)
        except RuntimeError:  # the loop closed meanwhile
            pass

    def _answer_here(self, task_id: str, responses: dict[str, Any]) -> None:
        """tasks/update reached another replica: the input lands in the task running here."""
        record = self.tasks.get(task_id)
        if record is not None and record.context is not None:
            record.context.answer(responses)

    def _cancel_here(self, task_id: str) -> None:
        record = self.tasks.get(task_id)
        cancelled = record is not None and record.finish("cancelled", "The task was cancelled by request.")
        if cancelled and record is not None and record.runner is not None:
            record.runner.cancel()

    # ------------------------------------------------------------ the core's hook

    async def maybe_run_as_task(self, ctx: RequestContext, tool_name: str, params: dict[str, Any], run: ToolRun) -> dict[str, Any] | None:
        """A CreateTaskResult when `params` asks for a task; None when the call runs normally.

        `run` performs the call and returns its CallToolResult (isError included); a
        JsonRpcError it raises becomes the task's error.
        """
        if ext.applies(ctx.version):
            return await self._maybe_create(ctx, tool_name, params, run)
        if "task" not in params or not supports_tasks(ctx.version):
            if TASK_SUPPORT.get(tool_name) == "required" and supports_tasks(ctx.version):
                raise JsonRpcError(METHOD_NOT_FOUND, f"Tool {tool_name} must be called as a task")
            return None
        if TASK_SUPPORT.get(tool_name, "forbidden") == "forbidden":
            raise JsonRpcError(METHOD_NOT_FOUND, f"Tool {tool_name} does not support task-augmented calls")
        ttl = _requested_ttl(params["task"])
        self._purge()
        shared_seq = self.board.next_seq() if self.board is not None else None
        self._seq = max(self._seq + 1, shared_seq or 0)
        record = TaskRecord(secrets.token_urlsafe(16), ctx.session.id, self._seq, ttl)
        self.tasks[record.id] = record
        if self.board is not None:
            self.board.publish(record.wire(), ttl)
        record.runner = asyncio.get_running_loop().create_task(self._execute(ctx, record, run))
        return {
            "task": record.view(),
            "_meta": {IMMEDIATE_RESPONSE: f"{tool_name} is running as task {record.id}; its result will follow."},
        }

    async def _maybe_create(self, ctx: RequestContext, tool_name: str, params: dict[str, Any], run: ToolRun) -> dict[str, Any] | None:
        """2026: the server decides. A long tool becomes a task when the client opted in (a legacy
        `task` param changes nothing); a task-only tool refuses a client that did not."""
        support = self.support.get(tool_name)
        if support is None:
            return None
        if not ext.client_declares(ctx):
            if support == "required":
                raise ext.missing_capability()
            return None
        gather = self.gatherers.get(tool_name)
        pending = gather(params) if gather is not None else None
        if pending is not None:
            return pending  # input_required: the MRTR rounds come before the task
        self._purge()
        owner = ext.owner_of(ctx.session)
        shared_seq = self.board.next_seq() if self.board is not None else None
        self._seq = max(self._seq + 1, shared_seq or 0)
        record = TaskRecord(secrets.token_urlsafe(16), owner, self._seq, DEFAULT_TTL_MS, owner=owner)
        inputs = params.get("inputResponses")
        record.context = ext.TaskContext(ctx, record, self._share, inputs if isinstance(inputs, dict) else None)
        self.tasks[record.id] = record
        if self.board is not None:
            self.board.publish(record.wire(), record.ttl_ms)  # durable before the handle goes out
        record.runner = asyncio.get_running_loop().create_task(self._execute(ctx, record, run))
        return ext.created(record)

    def _share(self, record: TaskRecord) -> None:
        """A running 2026 task changed (input requested or answered, progress): other replicas see
        it, and so do the owner's listen streams here that named it."""
        if self.board is not None and record.status not in TERMINAL:
            self.board.finish(record.wire(), record.ttl_ms)  # stores it unless it already ended
        self._tell_listeners(record)

    def _tell_listeners(self, record: TaskRecord) -> None:
        """notifications/tasks (the DetailedTask) to the subscriptions/listen streams open here of
        the task's owner; each stream sends it only when its filter named the task."""
        if record.owner is None or self._hub is None:
            return
        for session in self._hub.sessions():
            if versions.is_stateless(session.protocol_version) and ext.owner_of(session) == record.owner:
                note = asyncio.get_running_loop().create_task(self._deliver(session, ext.detailed(record)))
                self._notes.add(note)
                note.add_done_callback(self._notes.discard)

    async def _deliver(self, session: Any, task: dict[str, Any]) -> None:
        try:
            await session.notify(ext.STATUS_NOTIFICATION, task)
        except Exception:  # boundary: a listen stream that went away loses an optional notification
            log.debug("task status notification for %s not delivered", task.get("taskId"), exc_info=True)

    async def _execute(self, ctx: RequestContext, record: TaskRecord, run: ToolRun) -> None:
        try:
            if record.context is None:
                result = await run()
            else:  # 2026: input the task needs goes to its inputRequests, not to the creating request's rounds
                with mrtr.bound(None):
                    result = await run(record.context)
        except asyncio.CancelledError:
            record.finish("cancelled", "The task was cancelled.")
            raise
        except JsonRpcError as exc:
            record.error = exc
            changed = record.finish("failed", exc.message)
        except Exception:  # boundary: a failing tool fails its task, never the server
            log.exception("task %s failed", record.id)
            record.error = JsonRpcError(INTERNAL_ERROR, "Internal error")
            changed = record.finish("failed", "Internal error")
        else:
            record.result = result
            # 2026: a tool error is a completed task (its result says isError); failed is for protocol errors.
            tool_error = bool(result.get("isError"))
            changed = record.finish(
                "failed" if tool_error and record.owner is None else "completed",
                "The tool reported an error." if tool_error else "The operation completed.",
            )
        if changed and self.board is not None and self.board.finish(record.wire(), record.ttl_ms) is False:
            # Cancelled through another replica while it ran: that is its outcome.
            record.status, record.status_message = "cancelled", "The task was cancelled by request."
            record.result, record.error = None, None
        if changed:
            await self._announce(ctx, record)

    async def _announce(self, ctx: RequestContext, record: TaskRecord) -> None:
        if record.owner is not None:
            self._tell_listeners(record)  # 2026: no session channel; listen streams that asked
            return
        try:
            await ctx.session.notify("notifications/tasks/status", record.view())
        except Exception:  # boundary: the optional notification may find no channel
            log.debug("task status notification for %s not delivered", record.id, exc_info=True)

    # ------------------------------------------------------------ handlers

    def _find(self, ctx: RequestContext, params: dict[str, Any]) -> TaskRecord:
        task_id = params.get("taskId")
        if not isinstance(task_id, str):
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: taskId must be a string")
        self._purge()
        record = self.tasks.get(task_id)
        if record is None and self.board is not None:  # started through another replica
            shared = self.board.load(task_id)
            record = TaskRecord.from_wire(shared) if shared is not None else None
        if ext.applies(ctx.version):
            mine = record is not None and record.owner is not None and record.owner == ext.owner_of(ctx.session)
        else:
            mine = record is not None and record.owner is None and record.session_id == ctx.session.id
        if record is None or not mine:
            raise JsonRpcError(INVALID_PARAMS, "Failed to retrieve task: Task not found", data={"taskId": task_id})
        return record

    async def _get(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        if ext.applies(ctx.version):
            ext.require_extension(ctx)
            return ext.detailed(self._find(ctx, params))
        return self._find(ctx, params).view()

    async def _update(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        """2026: answers to a task's inputRequests (keys not outstanding are ignored); an empty ack."""
        if not ext.applies(ctx.version):
            raise JsonRpcError(METHOD_NOT_FOUND, "Method not found: tasks/update")
        ext.require_extension(ctx)
        record = self._find(ctx, params)
        responses = ext.input_responses(params)
        if record.context is not None:
            record.context.answer(responses)
        elif self.board is not None and record.status not in TERMINAL:  # it runs on another replica
            from memento.mcp.cluster_store import TASKS_CHANNEL

            self.board.bus.publish(TASKS_CHANNEL, {"op": "update", "taskId": record.id, "inputResponses": responses})
        return {}

    async def _result(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        if ext.applies(ctx.version):  # removed by the extension: the result is inlined on tasks/get
            raise JsonRpcError(METHOD_NOT_FOUND, "Method not found: tasks/result")
        record = self._find(ctx, params)
        if record.id in self.tasks:
            await record.done.wait()
        else:
            record = await self._wait_elsewhere(record)
        related = {RELATED_TASK: {"taskId": record.id}}
        if record.status == "cancelled":
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: the task was cancelled; it has no result", data={"taskId": record.id})
        if record.error is not None:
            raise JsonRpcError(
                record.error.code, record.error.message, data=record.error.data if record.error.data is not None else related
            )
        result = dict(record.result or {})
        result["_meta"] = {**result.get("_meta", {}), **related}
        return result

    async def _wait_elsewhere(self, record: TaskRecord) -> TaskRecord:
        """Poll the shared record of a task another replica runs until it ends (or expires)."""
        while record.status not in TERMINAL:
            if record.expired(_now()):
                raise JsonRpcError(INVALID_PARAMS, "Failed to retrieve task: Task not found", data={"taskId": record.id})
            await anyio.sleep(POLL_INTERVAL_MS / 2000)
            shared = self.board.load(record.id) if self.board is not None else None
            if shared is not None:
                record = TaskRecord.from_wire(shared)
        return record

    async def _list(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        if ext.applies(ctx.version):  # removed by the extension: nobody can enumerate tasks
            raise JsonRpcError(METHOD_NOT_FOUND, "Method not found: tasks/list")
        position = decode_cursor("tasks", params)
        if position is not None and not isinstance(position, int):
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: unknown cursor")
        self._purge()
        found = {r.id: r for r in self.tasks.values() if r.session_id == ctx.session.id}
        if self.board is not None:
            for shared in self.board.session_tasks(ctx.session.id):
                if shared.get("taskId") not in found and shared.get("sessionId") == ctx.session.id:
                    found[str(shared["taskId"])] = TaskRecord.from_wire(shared)
        mine = sorted(found.values(), key=lambda r: r.seq)
        if position is not None:
            mine = [r for r in mine if r.seq > position]
        page = mine[: self.page_size]
        result: dict[str, Any] = {"tasks": [r.view() for r in page]}
        if len(mine) > self.page_size:
            result["nextCursor"] = encode_cursor("tasks", page[-1].seq)
        return result

    async def _cancel(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        if ext.applies(ctx.version):
            ext.require_extension(ctx)
        record = self._find(ctx, params)
        if ext.applies(ctx.version) and record.status in TERMINAL:
            return {}  # idempotent: the ack is the same for a task that already ended
        if not record.finish("cancelled", "The task was cancelled by request."):
            raise JsonRpcError(INVALID_PARAMS, f"Invalid params: task is already {record.status}", data={"taskId": record.id})
        if self.board is not None and self.board.finish(record.wire(), record.ttl_ms) is False:
            if ext.applies(ctx.version):
                return {}
            ended = self.board.load(record.id)  # it ended elsewhere a moment ago
            status = ended.get("status") if ended is not None else "over"
            raise JsonRpcError(INVALID_PARAMS, f"Invalid params: task is already {status}", data={"taskId": record.id})
        if ext.applies(ctx.version):
            self._tell_listeners(record)
        if record.runner is not None:
            record.runner.cancel()  # best effort: a service call in a worker thread still finishes
        elif self.board is not None:
            self.board.request_cancel(record.id)  # it runs on another replica
        return {} if ext.applies(ctx.version) else record.view()

    # ------------------------------------------------------------ housekeeping

    def _purge(self) -> None:
        """Drop expired tasks and the tasks of sessions that no longer exist."""
        now = _now()
        # With replicas a session may live on elsewhere after this process let go of it: then
        # its tasks end by their ttl only.
        live = {s.id for s in self._hub.sessions()} if self._hub is not None and self.board is None else None
        for task_id, record in list(self.tasks.items()):
            orphan = live is not None and record.owner is None and record.session_id not in live
            if record.expired(now) or orphan:
                if record.runner is not None and not record.runner.done():
                    record.runner.cancel()
                del self.tasks[task_id]
