"""Fixtures of the conformance suite's tasks-* scenarios (SEP-2663), at 2026-07-28 only.

`greet` answers at once; `slow_compute`, `failing_job`, `protocol_error_job`, `confirm_delete`
and `multi_input` run as tasks when the client opted into the tasks extension
(`failing_job` only so: it is task-required); `test_tool_with_task` first gathers a name over
MRTR (`input_required`) and then runs as a task. They exist only with
MEMENTO_CONFORMANCE_FIXTURES=1: `install` registers their task support with the tasks
feature, and the core lists and calls `task_fixture_tools(version)` beside the other fixtures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from memento.mcp import versions
from memento.mcp.features import RequestContext
from memento.mcp.fixtures import FixtureTool, text_result
from memento.mcp.jsonrpc import INTERNAL_ERROR, JsonRpcError

if TYPE_CHECKING:
    from memento.mcp.tasks import TasksFeature

MAX_SECONDS = 600.0
FAILING_JOB_DELAY_S = 1.0
ASK_NAME = "user_name"


def _seconds(args: dict[str, Any]) -> float:
    value = args.get("seconds", 1)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise JsonRpcError(-32602, "Invalid params: seconds must be a non-negative number")
    return min(float(value), MAX_SECONDS)


async def _greet(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    return text_result(f"Hello, {args.get('name', 'World')}!")


async def _slow_compute(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    seconds, label = _seconds(args), str(args.get("label", "slow_compute"))
    steps = max(1, int(seconds))
    for step in range(steps):
        await ctx.progress(step, steps, f"{label}: computing")
        await anyio.sleep(seconds / steps)
    return text_result(f"{label}: computed after {seconds:g}s")


async def _failing_job(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    await anyio.sleep(FAILING_JOB_DELAY_S)
    return text_result("failing_job: the job failed (a tool execution error)", error=True)


async def _protocol_error_job(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    await anyio.sleep(0)
    raise JsonRpcError(INTERNAL_ERROR, "protocol_error_job: internal failure")


def _elicitation(message: str, properties: dict[str, Any]) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties, "required": list(properties)}
    return {"mode": "form", "message": message, "requestedSchema": schema}


async def _confirm_delete(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    filename = str(args.get("filename", "file"))
    answer = await ctx.request("elicitation/create", _elicitation(f"Delete {filename}?", {"confirm": {"type": "boolean"}}))
    content = answer.get("content")
    if answer.get("action") == "accept" and isinstance(content, dict) and content.get("confirm") is True:
        return text_result(f"Deleted {filename}")
    return text_result(f"Kept {filename}: not confirmed")


async def _multi_input(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    answers: dict[str, dict[str, Any]] = {}

    async def ask(label: str, message: str) -> None:
        answers[label] = await ctx.request("elicitation/create", _elicitation(message, {"name": {"type": "string"}}))

    async with anyio.create_task_group() as group:  # both requests pending at once
        group.start_soon(ask, "first", "First name?")
        group.start_soon(ask, "second", "Second name?")
    names = [str((answers[k].get("content") or {}).get("name", "")) for k in ("first", "second")]
    return text_result("Received: " + ", ".join(names))


async def _tool_with_task(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    responses = getattr(ctx, "input_responses", {})
    answer = responses.get(ASK_NAME) if isinstance(responses, dict) else None
    content = answer.get("content") if isinstance(answer, dict) else None
    name = content.get("name") if isinstance(content, dict) else None
    await anyio.sleep(0)
    return text_result(f"Hello, {name or 'stranger'}!")


def _gather_name(params: dict[str, Any]) -> dict[str, Any] | None:
    """Round 1 of test_tool_with_task: ask for the user's name (MRTR) until it comes back."""
    responses = params.get("inputResponses")
    if isinstance(responses, dict) and isinstance(responses.get(ASK_NAME), dict):
        return None
    request = {"method": "elicitation/create", "params": _elicitation("What is your name?", {"name": {"type": "string"}})}
    return {"resultType": "input_required", "inputRequests": {ASK_NAME: request}}


def _args(**properties: str) -> dict[str, Any]:
    return {"type": "object", "properties": {name: {"type": kind} for name, kind in properties.items()}}


TASK_FIXTURE_TOOLS: tuple[FixtureTool, ...] = (
    FixtureTool("greet", "Says hello at once (never a task)", _greet, _args(name="string")),
    FixtureTool(
        "slow_compute",
        "Sleeps `seconds` then answers; a task when the client allows",
        _slow_compute,
        _args(seconds="number", label="string"),
    ),
    FixtureTool("failing_job", "A task-only job that ends in a tool error", _failing_job),
    FixtureTool("protocol_error_job", "A job that fails with a protocol error", _protocol_error_job),
    FixtureTool("confirm_delete", "Asks to confirm a deletion while running as a task", _confirm_delete, _args(filename="string")),
    FixtureTool("multi_input", "Asks for two inputs at once while running as a task", _multi_input),
    FixtureTool("test_tool_with_task", "Gathers a name over MRTR, then runs as a task", _tool_with_task),
)
TASK_SUPPORT = {
    "slow_compute": "optional",
    "failing_job": "required",
    "protocol_error_job": "optional",
    "confirm_delete": "optional",
    "multi_input": "optional",
    "test_tool_with_task": "required",
}


def task_fixture_tools(version: str) -> tuple[FixtureTool, ...]:
    """The tasks-* fixtures, at the revision that has the tasks extension only."""
    return TASK_FIXTURE_TOOLS if versions.is_stateless(version) else ()


def install(tasks: TasksFeature) -> None:
    """Register the fixtures' task support (and test_tool_with_task's MRTR round) with `tasks`."""
    for name, support in TASK_SUPPORT.items():
        tasks.add_task_tool(name, support, _gather_name if name == "test_tool_with_task" else None)
