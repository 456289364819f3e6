"""The memento toolset's tools (seed 000's eleven and seed 004's): schemas generated from the operation models, calls sent to the service.

A tool call never fails at the protocol level once the tool is found: bad arguments and
service errors become tool results with `isError: true`, so the model can read and correct them.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio.from_thread
import anyio.to_thread
from pydantic import BaseModel, ValidationError

from memento.errors import InvalidParams, MementoError, SessionRequired
from memento.exchange.page import ExportInput, ExportPage, export_page
from memento.mcp import versions
from memento.mcp.jsonrpc import INVALID_PARAMS, JsonRpcError
from memento.mcp.mrtr import InputNeeded
from memento.mcp.versions import ToolHints
from memento.models import (
    AmendInput,
    CallContext,
    ConsolidateInput,
    ContextInput,
    FeedbackInput,
    ForgetInput,
    GraphExploreInput,
    LinkInput,
    MemoryStatsInput,
    PinInput,
    RecallInput,
    ReflectInput,
    RememberInput,
    RestoreInput,
    SummarizeThreadInput,
    ToolFeedbackInput,
    VerifyErasureInput,
)
from memento.results import (
    AmendResult,
    ConsolidateResult,
    ContextResult,
    FeedbackResult,
    ForgetResult,
    GraphResult,
    LinkResult,
    PinResult,
    RecallResult,
    ReflectResult,
    RememberResult,
    RestoreResult,
    Result,
    StatsResult,
    SummarizeThreadResult,
    ToolFeedbackResult,
    VerifyErasureResult,
)
from memento.service import MemoryService

if TYPE_CHECKING:
    from memento.mcp.features import RequestContext

log = logging.getLogger(__name__)


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Replace local `#/$defs/...` references by their definitions and drop `$defs`.

    Some clients do not resolve `$ref`; the operation models are not recursive, so inlining
    always terminates.
    """
    defs: dict[str, Any] = schema.get("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, list):
            return [resolve(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            ref = node["$ref"]
            name = ref.removeprefix("#/$defs/")
            if name == ref or name not in defs:
                raise ValueError(f"cannot inline schema reference {ref!r}")
            siblings = {k: resolve(v) for k, v in node.items() if k != "$ref"}
            return {**resolve(copy.deepcopy(defs[name])), **siblings}
        return {k: resolve(v) for k, v in node.items() if k != "$defs"}

    inlined: dict[str, Any] = resolve(schema)
    return inlined


Operation = Callable[..., Result]
"""A MemoryService operation, unbound: operation(service, inp, ctx[, progress=...]) -> result."""


def drop_titles(node: Any) -> Any:
    """`node` without the schema keyword `title` anywhere (property names are kept)."""
    if isinstance(node, list):
        return [drop_titles(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {
        k: ({name: drop_titles(sub) for name, sub in v.items()} if k == "properties" else drop_titles(v))
        for k, v in node.items()
        if not (k == "title" and isinstance(v, str))
    }


def compact_output(schema: dict[str, Any]) -> dict[str, Any]:
    """An output schema that validates the same documents in fewer tokens (it is sent in every
    tools/list): the result's own fields keep their full schemas; a nested model (a fragment, say)
    is an object, described by the tool's description and docs/mcp.md (the fragment view's
    fields are listed there once instead of in every tool). Titles, descriptions and defaults go; `anyOf [X, null]` becomes
    `type: [X, "null"]`; nothing is left as a `$ref` (some clients resolve none)."""
    defs: dict[str, Any] = schema.get("$defs", {})

    def shrink(node: Any) -> Any:
        if isinstance(node, list):
            return [shrink(item) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            target = defs[ref.removeprefix("#/$defs/")]
            if target.get("type") == "object" and "properties" in target:  # a nested model
                return {"type": "object"}
            return shrink(target)  # an enum or a plain type: inlined
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in ("$defs", "title", "description", "default"):
                continue
            if key == "properties":
                out[key] = {name: shrink(sub) for name, sub in value.items()}
            else:
                out[key] = shrink(value)
        branches = out.get("anyOf")
        if isinstance(branches, list) and len(branches) == 2 and {"type": "null"} in branches:
            other = next(b for b in branches if b != {"type": "null"})
            if isinstance(other, dict) and isinstance(other.get("type"), str):
                del out["anyOf"]
                out.update(other, type=[other["type"], "null"])
        return out

    compact: dict[str, Any] = shrink(schema)
    return compact


def full_output(schema: dict[str, Any]) -> dict[str, Any]:
    """An output schema with its nested objects inlined, titles and `additionalProperties` gone
    (what a seed's schema writes; the extra keys would only cost tokens)."""

    def strip(node: Any) -> Any:
        if isinstance(node, list):
            return [strip(item) for item in node]
        if not isinstance(node, dict):
            return node
        return {
            k: ({name: strip(sub) for name, sub in v.items()} if k == "properties" else strip(v))
            for k, v in node.items()
            if k != "additionalProperties" and not (k == "title" and isinstance(v, str))
        }

    stripped: dict[str, Any] = strip(inline_refs(schema))
    return stripped


SCHEMA_LIMITS = ("maxLength", "minLength", "maxItems", "minItems", "pattern", "minimum", "maximum")


def compact_input(schema: dict[str, Any]) -> dict[str, Any]:
    """An input schema for tools/list in few tokens (it is sent every session): references inlined,
    titles gone, `anyOf [X, null]` of an optional parameter is just X (omitting it is the way to
    leave it unset; null is still accepted), null defaults and the length and pattern limits go
    (the server enforces them and names a broken one in its error), and an enum's own description
    gives way to the property's. Every property keeps its description."""

    def shrink(node: Any, *, top: bool = False) -> Any:
        if isinstance(node, list):
            return [shrink(item) for item in node]
        if not isinstance(node, dict):
            return node
        branches = node.get("anyOf")
        if isinstance(branches, list) and len(branches) == 2 and {"type": "null"} in branches:
            other = next(b for b in branches if b != {"type": "null"})
            inner = {k: v for k, v in other.items() if k != "description" or "description" not in node}
            node = {**inner, **{k: v for k, v in node.items() if k != "anyOf"}}
        if node.get("collapse") is True:  # a bag of optional fields its description lists (RecordInput)
            return {"type": "object", "description": node["description"]}
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "title" and isinstance(value, str):
                continue
            if key in SCHEMA_LIMITS or (key == "default" and value in (None, False)) or (key == "description" and top):
                continue
            if key == "additionalProperties" and (value is True or top):  # unknown arguments are refused all the same
                continue
            out[key] = {name: shrink(sub) for name, sub in value.items()} if key == "properties" else shrink(value)
        return out

    compact: dict[str, Any] = shrink(inline_refs(schema), top=True)
    return compact


@dataclass(frozen=True)
class ToolSpec:
    """One MCP tool: its wire description, the service operation it calls and what that returns."""

    name: str
    title: str
    description: str
    input_model: type[BaseModel]
    operation: Operation  # e.g. MemoryService.remember, called as operation(service, inp, ctx)
    result_model: type[Result]
    hints: ToolHints = field(default_factory=ToolHints)
    reports_progress: bool = False  # the operation takes progress=callable(done, total, stage)
    # Always declares its whole outputSchema and returns structuredContent (2025-06-18 and later),
    # whatever MEMENTO_STRUCTURED_OUTPUT says: its seed requires it (002 §3.2).
    structured: bool = False

    def input_schema(self) -> dict[str, Any]:
        return compact_input(self.input_model.model_json_schema())

    def output_schema(self) -> dict[str, Any]:
        """The JSON schema of the tool's structuredContent: its result model's, compacted (see
        `compact_output`): it is sent in every tools/list, and clients pay for it in tokens. A
        `structured` tool's is whole (nested objects kept), as its seed writes it."""
        if self.structured:
            return full_output(self.result_model.json_schema())
        return compact_output(self.result_model.json_schema())

    def definition(self, version: str, *, structured: bool = False) -> dict[str, Any]:
        """The `tools/list` entry for the negotiated version; the outputSchema only with
        structured output on (MEMENTO_STRUCTURED_OUTPUT, or a `structured` tool)."""
        return versions.tool_definition(
            version,
            name=self.name,
            title=self.title,
            description=self.description,
            input_schema=self.input_schema(),
            output_schema=self.output_schema() if structured or self.structured else None,
            hints=self.hints,
        )


_READ = ToolHints(read_only=True, idempotent=True)

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "remember",
        "Remember",
        "Store a typed memory; created=false when it was already known.",
        RememberInput,
        MemoryService.remember,
        RememberResult,
        ToolHints(idempotent=True),
    ),
    ToolSpec(
        "recall",
        "Recall",
        "Search memories by text, keywords, topic, type or tags, within a token budget.",
        RecallInput,
        MemoryService.recall,
        RecallResult,
        ToolHints(read_only=True),
    ),
    ToolSpec(
        "forget",
        "Forget",
        "Forget a memory by id, or a topic: soft (default, restorable) or hard (erased everywhere, with a receipt).",
        ForgetInput,
        MemoryService.forget,
        ForgetResult,
        ToolHints(destructive=True, idempotent=True),
    ),
    ToolSpec(
        "link",
        "Link",
        "Link two memories: fromId <relationType> toId, e.g. an error resolved_by its fix.",
        LinkInput,
        MemoryService.link,
        LinkResult,
        ToolHints(idempotent=True),
    ),
    ToolSpec(
        "amend",
        "Amend",
        "Change a memory in place (old version archived) or supersede it with a new one.",
        AmendInput,
        MemoryService.amend,
        AmendResult,
        ToolHints(destructive=True),
    ),
    ToolSpec(
        "pin",
        "Pin",
        "Pin a memory: it never expires, decays or gets merged.",
        PinInput,
        MemoryService.pin,
        PinResult,
        ToolHints(idempotent=True),
    ),
    ToolSpec(
        "unpin",
        "Unpin",
        "Unpin a memory: the lifecycle may age it again.",
        PinInput,
        MemoryService.unpin,
        PinResult,
        ToolHints(idempotent=True),
    ),
    ToolSpec(
        "reflect",
        "Reflect",
        "At session end, store a summary, decisions, fixed errors, procedures and open questions.",
        ReflectInput,
        MemoryService.reflect,
        ReflectResult,
    ),
    ToolSpec(
        "context",
        "Load context",
        "At session start: core memory and this session's working memory.",
        ContextInput,
        MemoryService.context,
        ContextResult,
        _READ,
    ),
    ToolSpec(
        "tool_feedback",
        "Tool feedback",
        "Rate a tool's results: relevant, sufficient.",
        ToolFeedbackInput,
        MemoryService.tool_feedback,
        ToolFeedbackResult,
    ),
    ToolSpec(
        "memory_stats",
        "Statistics",
        "Memory counts by tier and type, embedding coverage, utility.",
        MemoryStatsInput,
        MemoryService.memory_stats,
        StatsResult,
        _READ,
    ),
    ToolSpec(
        "memory_consolidate",
        "Consolidate",
        "Run maintenance now (tier moves, decay, expiry, merging); per-stage counts.",
        ConsolidateInput,
        MemoryService.memory_consolidate,
        ConsolidateResult,
        ToolHints(destructive=True),
        reports_progress=True,
    ),
    ToolSpec(
        "graph_explore",
        "Explore graph",
        "Follow caused_by/resolved_by links from a memory (root-cause analysis).",
        GraphExploreInput,
        MemoryService.graph_explore,
        GraphResult,
        _READ,
    ),
    ToolSpec(
        "restore",
        "Restore",
        "Bring back a memory forgotten with mode=soft.",
        RestoreInput,
        MemoryService.restore,
        RestoreResult,
        ToolHints(idempotent=True),
    ),
    ToolSpec(
        "verify_erasure",
        "Verify erasure",
        "Check a hard forget's receipt: digest, on file, nothing left anywhere.",
        VerifyErasureInput,
        MemoryService.verify_erasure,
        VerifyErasureResult,
        _READ,
    ),
    ToolSpec(
        "feedback",
        "Feedback",
        "Say how a recalled memory served: helpful, not_helpful, used, edited or neglected.",
        FeedbackInput,
        MemoryService.feedback,
        FeedbackResult,
    ),
    ToolSpec(
        "export",
        "Export",
        "Export your memories as NDJSON (lossless), Markdown or CSV, a page at a time.",
        ExportInput,
        export_page,
        ExportPage,
        _READ,
    ),
    ToolSpec(
        "summarize_thread",
        "Summarize thread",
        "Summarize this session's working memory into one episodic memory; keep=false clears it.",
        SummarizeThreadInput,
        MemoryService.summarize_thread,
        SummarizeThreadResult,
    ),
)

TOOLS_BY_NAME: Mapping[str, ToolSpec] = {spec.name: spec for spec in TOOLS}


STATELESS_SESSION_HINT = (
    ". At MCP 2026-07-28 there is no protocol session: open one with the `session` tool (action open)"
    " and pass the handle it returns as this tool's `session` argument"
)
"""How a 2026-07-28 caller gets the session a working-memory call needs (mcp/handles.py)."""


def describe_validation_error(tool: str, exc: ValidationError) -> str:
    """A one-line message naming every bad field, e.g. `content: Field required`."""
    problems = []
    for err in exc.errors(include_url=False, include_context=False, include_input=False):
        where = ".".join(str(part) for part in err["loc"]) or "arguments"
        problems.append(f"{where}: {err['msg']}")
    return f"invalid arguments for {tool}: " + "; ".join(problems)


def _progress_bridge(rctx: RequestContext) -> Any:
    """A sync `progress(done, total, stage)` for the worker thread that reports to `rctx`."""

    def report(done: int, total: int, stage: str) -> None:
        try:
            anyio.from_thread.run(rctx.progress, float(done), float(total), stage)
        except Exception:  # boundary: a lost progress note must not fail the operation
            log.debug("progress notification failed", exc_info=True)

    return report


async def call_tool(
    spec: ToolSpec,
    arguments: Mapping[str, Any],
    service: MemoryService,
    ctx: CallContext,
    version: str,
    rctx: RequestContext | None = None,
    *,
    structured: bool = False,
) -> dict[str, Any]:
    """Validate, run the service method in a worker thread, and shape the result for `version`.

    With a request context, the call is logged to the client (debug level) and a tool that
    reports progress sends notifications/progress when the request carried a progressToken.
    """
    if rctx is not None:
        await rctx.log("debug", {"event": "tools/call", "tool": spec.name})
    try:
        # JSON mode: the models are strict, and strict JSON validation still reads enum values
        # and ISO timestamps from strings, exactly as a client sends them.
        inp = spec.input_model.model_validate_json(json.dumps(dict(arguments)))
    except ValidationError as exc:
        return versions.tool_error(version, "invalid_argument", describe_validation_error(spec.name, exc), structured=structured)
    call = partial(spec.operation, service, inp, ctx)
    if spec.reports_progress and rctx is not None and "progressToken" in rctx.meta:
        call = partial(spec.operation, service, inp, ctx, progress=_progress_bridge(rctx))
    try:
        result = await anyio.to_thread.run_sync(call)
    except InvalidParams as exc:  # refused by the protocol itself, as the seed asks
        raise JsonRpcError(INVALID_PARAMS, exc.message) from None
    except MementoError as failed:
        log.info("tool %s failed: %s", spec.name, failed.code)  # the message may quote input: not logged
        named = getattr(inp, "agentId", None) or getattr(inp, "agent_id", None)  # the namespace the call asked for
        told = await anyio.to_thread.run_sync(service.explain, failed, ctx, named if isinstance(named, str) else None)
        message = told.message + (STATELESS_SESSION_HINT if isinstance(told, SessionRequired) and versions.is_stateless(version) else "")
        return versions.tool_error(version, told.code, message, structured=structured)
    except InputNeeded:  # 2026-07-28: answered input_required by the core (mrtr.py)
        raise
    except Exception:  # boundary: one broken call must not take the server down
        log.exception("tool %s raised unexpectedly", spec.name)
        return versions.tool_error(version, "internal", "internal error", structured=structured)
    if not isinstance(result, spec.result_model):
        log.error("tool %s returned %s, not %s", spec.name, type(result).__name__, spec.result_model.__name__)
        return versions.tool_error(version, "internal", "internal error", structured=structured)
    return versions.tool_result(version, result.dump(), structured=structured)  # the one serialisation of every tool result
