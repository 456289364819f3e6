"""The tasks extension `io.modelcontextprotocol/tasks` (SEP-2663), spoken at 2026-07-28.

At the stateless revision tasks are an extension a client opts into per request (its
`_meta` client capabilities name it) and the server decides, per call, whether a tool runs as
a task: the long operations here (consolidation, export) always do when the client opted in.
The handle is flat (`resultType: "task"`, `taskId`, `status`, `ttlMs`, `pollIntervalMs`);
`tasks/get` returns the task with its result, error or pending `inputRequests` inlined;
`tasks/update` answers those input requests; `tasks/cancel` acknowledges with nothing.
There is no `tasks/list` and no `tasks/result`. A task belongs to the credential that
started it, not to a session (there are none): nobody else can see or touch it.

`TasksFeature` (tasks.py) keeps the records and the lifecycle; this module holds what differs
at 2026: the policy, the gate, the wire shapes, and `TaskContext` — the request context a tool
running as a task gets, through which its progress becomes the task's `statusMessage` and its
server→client requests become the task's `inputRequests`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio

from memento.mcp import versions
from memento.mcp.jsonrpc import INVALID_PARAMS, JsonRpcError
from memento.mcp.namespace import principal

if TYPE_CHECKING:
    from memento.mcp.features import RequestContext, SessionView
    from memento.mcp.tasks import TaskRecord

EXTENSION = "io.modelcontextprotocol/tasks"
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
TASK_SUPPORT: Mapping[str, str] = {"memory_consolidate": "optional", "consolidate_memories": "optional", "export": "optional"}
"""The tools that run as tasks at 2026 whenever the client opted into the extension (the long
operations); "required" would refuse the call to a client that did not."""
STATUS_NOTIFICATION = "notifications/tasks"
"""A task's DetailedTask, sent on the caller's subscriptions/listen streams that named it."""
WAITING_FOR_INPUT = "Waiting for the client's input (see inputRequests)."

Gatherer = Callable[[dict[str, Any]], "dict[str, Any] | None"]
"""Before a task is created: an `input_required` result while input the call needs is
missing (MRTR, resolved synchronously), else None."""


def applies(version: str) -> bool:
    """Whether the extension (rather than the 2025-11-25 tasks) governs requests of `version`."""
    return versions.is_stateless(version)


def client_declares(ctx: RequestContext) -> bool:
    """Whether this request's client capabilities name the extension (per request: never inferred)."""
    caps = ctx.meta.get(CLIENT_CAPABILITIES)
    if not isinstance(caps, dict):
        caps = ctx.session.client_capabilities
    extensions = caps.get("extensions") if isinstance(caps, dict) else None
    return isinstance(extensions, dict) and EXTENSION in extensions


def missing_capability() -> JsonRpcError:
    return JsonRpcError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"Missing required client capability: the {EXTENSION} extension",
        data={"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
    )


def require_extension(ctx: RequestContext) -> None:
    """tasks/get, tasks/update and tasks/cancel exist only for a client that opted in."""
    if not client_declares(ctx):
        raise missing_capability()


def owner_of(session: SessionView) -> str:
    """Who a 2026 task belongs to: the credential of the request that created it."""
    who = principal(session)
    return "|".join(("v2", who.kind, who.subject, who.agent_id or "", who.workspace or ""))


def input_responses(params: dict[str, Any]) -> dict[str, Any]:
    """`params.inputResponses` of tasks/update: an object, else -32602."""
    responses = params.get("inputResponses")
    if not isinstance(responses, dict):
        raise JsonRpcError(INVALID_PARAMS, "Invalid params: inputResponses must be an object")
    return responses


# ---------------------------------------------------------------- wire shapes


def handle(record: TaskRecord) -> dict[str, Any]:
    """The Task fields every 2026 shape carries (CreateTaskResult is this plus resultType)."""
    task: dict[str, Any] = {
        "taskId": record.id,
        "status": record.status,
        "createdAt": _iso(record.created_at),
        "lastUpdatedAt": _iso(record.updated_at),
        "ttlMs": record.ttl_ms,
    }
    if record.status_message:
        task["statusMessage"] = record.status_message
    if record.status not in ("completed", "failed", "cancelled"):
        task["pollIntervalMs"] = record.poll_ms
    return task


def created(record: TaskRecord) -> dict[str, Any]:
    """The CreateTaskResult: flat, never with result, error or inputRequests."""
    return {"resultType": "task", **handle(record)}


def detailed(record: TaskRecord) -> dict[str, Any]:
    """The DetailedTask of tasks/get: the outcome or the pending input inlined."""
    task = handle(record)
    if record.status == "input_required":
        task["inputRequests"] = dict(record.input_requests)
    elif record.status == "completed" and record.result is not None:
        task["result"] = record.result
    elif record.status == "failed" and record.error is not None:
        error: dict[str, Any] = {"code": record.error.code, "message": record.error.message}
        if record.error.data is not None:
            error["data"] = record.error.data
        task["error"] = error
    return task


def _iso(moment: Any) -> str:
    return str(moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"))


# ---------------------------------------------------------------- the running task's context


class TaskContext:
    """The `RequestContext` of a tool running as a 2026 task, after its CreateTaskResult went.

    There is no stream left to the client: notifications and log messages are dropped,
    progress becomes the task's `statusMessage`, and a server→client request (elicitation,
    sampling) becomes an entry of the task's `inputRequests`, answered through tasks/update.
    `changed` is called whenever the record changed (to share it with other replicas).
    """

    def __init__(
        self, origin: RequestContext, record: TaskRecord, changed: Callable[[TaskRecord], None], inputs: dict[str, Any] | None = None
    ) -> None:
        self.session = origin.session
        self.request_id = origin.request_id
        self.version = origin.version
        # A progress token, so that operations which report progress do so (to the record).
        self.meta = {**origin.meta, "progressToken": f"task/{record.id}"}
        self.cancelled = anyio.Event()
        self.input_responses = dict(inputs or {})  # what the MRTR rounds before the task gathered
        self._record = record
        self._changed = changed
        self._keys = itertools.count(1)
        self._waiting: dict[str, tuple[anyio.Event, list[dict[str, Any]]]] = {}

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        return None  # no channel: the client polls tasks/get

    async def log(self, level: str, data: Any, logger: str = "memento") -> None:
        return None

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        record = self._record
        if record.status != "working":
            return
        done = f"{progress:g}/{total:g}" if total is not None else f"{progress:g}"
        record.touch(status_message=f"{message} ({done})" if message else f"In progress ({done}).")
        self._changed(record)

    async def request(self, method: str, params: dict[str, Any], timeout_s: float = 60.0) -> dict[str, Any]:
        """Park the task in input_required with this request until tasks/update answers it."""
        record = self._record
        key = f"{method.rsplit('/', 1)[0]}-{next(self._keys)}"  # unique over the task's lifetime
        answered: list[dict[str, Any]] = []
        event = anyio.Event()
        self._waiting[key] = (event, answered)
        record.input_requests[key] = {"method": method, "params": params}
        if record.status == "working":
            record.touch(status="input_required", status_message=WAITING_FOR_INPUT)
        self._changed(record)
        try:
            await event.wait()  # bounded by the task's ttl: an expired task is cancelled
        finally:
            self._waiting.pop(key, None)
            record.input_requests.pop(key, None)
        return answered[0]

    def answer(self, responses: dict[str, Any]) -> bool:
        """Deliver tasks/update's responses; keys not outstanding are ignored. True when any landed."""
        record = self._record
        landed = False
        for key, response in responses.items():
            waiter = self._waiting.pop(key, None)
            if waiter is None:
                continue
            event, answered = waiter
            answered.append(response if isinstance(response, dict) else {})
            record.input_requests.pop(key, None)
            event.set()
            landed = True
        if landed and not record.input_requests and record.status == "input_required":
            record.touch(status="working", status_message="The operation is in progress.")
        if landed:
            self._changed(record)
        return landed

    async def close_stream(self, retry_ms: int | None = None) -> bool:
        return False
