"""Hypothesis strategies for the fuzz suites: JSON values, JSON-RPC shapes, and raw bytes.

Text includes lone surrogates (sent as JSON escapes); numbers include huge integers; the raw
layer adds what no JSON encoder produces: invalid UTF-8, BOMs, NaN, deep nesting, truncation.
`EXAMPLES` (MEMENTO_FUZZ_EXAMPLES) scales every suite; the CI default keeps each file short.
"""

from __future__ import annotations

import getpass
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

EXAMPLES = int(os.environ.get("MEMENTO_FUZZ_EXAMPLES", "200"))
"""Examples per property; each fuzz test scales it by its own factor (stdio is cheap, SSE less)."""


def fuzz_settings(factor: float = 1.0) -> settings:
    """No example database (the repository stays clean), no deadline (real servers vary)."""
    return settings(
        max_examples=max(1, int(EXAMPLES * factor)),
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# Hypothesis' caches (its example database is off, see `fuzz_settings`) live beside pytest's
# temporary directories, never in the repository. Set at import: its pytest plugin writes them
# while collecting, before any fixture runs.
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / f"pytest-of-{getpass.getuser()}" / "hypothesis")


likely = st.sampled_from([True] * 5 + [False])  # mostly well-formed, so calls get deep
# Every category, lone surrogates (Cs) included.
texts = st.text(st.characters(exclude_categories=()), max_size=30)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**60), max_value=10**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4), max_leaves=12)

METHODS = (
    "initialize",
    "ping",
    "logging/setLevel",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "tasks/get",
    "tasks/result",
    "tasks/list",
    "tasks/cancel",
    "notifications/initialized",
    "notifications/progress",
    "notifications/roots/list_changed",
    "sampling/createMessage",
    "nonexistent/method",
)
TOOLS = {
    "remember": ("content", "topic", "type", "keywords", "importance", "scope", "isAnchor", "createdAt", "linkedTo"),
    "recall": ("keywords", "topic", "type", "text", "tokenBudget", "limit", "includeLinks", "threshold"),
    "forget": ("id", "topic", "force"),
    "link": ("fromId", "toId", "relationType"),
    "amend": ("id", "content", "topic", "keywords", "importance", "supersedes"),
    "reflect": ("summary", "decisions", "errors_resolved", "new_procedures", "open_questions"),
    "context": ("tokenBudget", "types"),
    "tool_feedback": ("tool_name", "relevant", "sufficient", "suggestion"),
    "memory_stats": (),
    "graph_explore": ("startId", "depth"),
}
GOOD = {  # values of the right type, often accepted, so calls get past validation
    "content": texts.filter(str.strip),
    "summary": texts.filter(str.strip),
    "text": texts,
    "topic": st.sampled_from(["t", "deploys", "x" * 40]) | texts,
    "type": st.sampled_from(["fact", "decision", "error", "preference", "procedure", "relation"]),
    "keywords": st.lists(texts, max_size=3),
    "importance": st.floats(0, 1),
    "limit": st.integers(-2, 30),
    "tokenBudget": st.integers(-10, 5000),
    "id": st.sampled_from(["frag-0000000000000000"]) | texts,
    "depth": st.integers(-1, 5),
    "force": st.booleans(),
    "relationType": st.sampled_from(["related", "caused_by"]),
}
ids = st.integers() | texts | st.integers(min_value=-(10**40), max_value=10**40)
odd_ids = st.none() | st.booleans() | st.floats(allow_nan=False) | st.lists(st.integers(), max_size=2)


@st.composite
def tool_arguments(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A known tool with a mix of its own argument names and others, holding any JSON value."""
    name = draw(st.sampled_from(sorted(TOOLS)) if draw(likely) else texts)
    names = st.sampled_from(TOOLS.get(name) or ("content",))
    arguments = {
        field: draw(GOOD.get(field, texts) if draw(likely) else json_values) for field in draw(st.lists(names | texts, max_size=5))
    }
    return name, arguments


@st.composite
def params_for(draw: st.DrawFn, method: str) -> Any:
    if method == "tools/call":
        name, arguments = draw(tool_arguments())
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if draw(st.booleans()):
            params["_meta"] = draw(st.dictionaries(st.sampled_from(["progressToken"]) | texts, json_values, max_size=2))
        return params
    if method == "resources/read":
        uri = draw(st.sampled_from(["memento://stats", "memento://fragments/x", "memento://topics"]) | texts)
        return {"uri": uri}
    if method == "logging/setLevel":
        return {"level": draw(st.sampled_from(["debug", "info", "error", "loud"]) | json_values)}
    return draw(st.dictionaries(texts, json_values, max_size=3))


@st.composite
def messages(draw: st.DrawFn) -> Any:
    """JSON-RPC-shaped values: requests, notifications, responses, with any field wrong or missing."""
    method = draw(st.sampled_from(METHODS) | st.just("tools/call") | texts)
    if method == "notifications/cancelled":
        method = "ping"  # a cancellation may legitimately leave another request unanswered
    message: dict[str, Any] = {}
    if draw(likely):
        message["jsonrpc"] = "2.0"
    elif draw(st.booleans()):
        message["jsonrpc"] = draw(json_values)
    shape = draw(st.sampled_from(["request", "request", "request", "notification", "response"]))
    if shape != "notification":
        message["id"] = draw(ids if draw(likely) else odd_ids)
    if shape == "response":
        field = draw(st.sampled_from(["result", "error", "both"]))
        if field in ("result", "both"):
            message["result"] = draw(json_values)
        if field in ("error", "both"):
            message["error"] = draw(json_values)
        return message
    message["method"] = method if draw(likely) else draw(json_values)
    if draw(likely):
        message["params"] = draw(params_for(method)) if draw(likely) else draw(json_values)
    return message


_SHAPES = {"message": messages(), "json": json_values, "batch": st.lists(messages() | json_values, max_size=4)}
values = st.sampled_from(["message"] * 6 + ["json", "batch"]).flatmap(_SHAPES.__getitem__)


@st.composite
def raw_bodies(draw: st.DrawFn, *, newline: bool = True) -> bytes:
    """Raw message bytes: encoded values, mutated encodings, or arbitrary bytes."""
    kind = draw(st.sampled_from(["value", "value", "value", "mutated", "mutated", "bytes"]))
    if kind == "bytes":
        raw = draw(st.binary(max_size=200))
    else:
        raw = json.dumps(draw(values), ensure_ascii=draw(st.booleans()), separators=(",", ":")).encode("utf-8", "surrogatepass")
        if kind == "mutated":
            raw = draw(mutations(raw))
    return raw if newline else raw.replace(b"\n", b" ").replace(b"\r", b" ")


@st.composite
def mutations(draw: st.DrawFn, raw: bytes) -> bytes:
    """One hostile change to an encoded message."""
    how = draw(st.sampled_from(["bom", "nest", "cut", "byte", "number", "surrogate", "utf16"]))
    at = draw(st.integers(0, len(raw)))
    if how == "bom":
        return b"\xef\xbb\xbf" + raw
    if how == "nest":
        depth = draw(st.sampled_from([62, 63, 64, 65, 200, 2000, 100_000]))
        return b"[" * depth + raw + b"]" * depth
    if how == "cut":
        return raw[:at]
    if how == "byte":
        return raw[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\x80"])) + raw[at:]
    if how == "number":
        number = draw(st.sampled_from([b"NaN", b"Infinity", b"-Infinity", b"1e999", b"9" * 5000, b"-0", b"1" * 400]))
        return raw.replace(b"2.0", number, 1) if b":" not in raw[:at] else raw[:at] + number + raw[at:]
    if how == "surrogate":
        return raw.replace(b'"', b'"\\udc80', 1)
    return raw.decode("utf-8", "surrogatepass").encode("utf-16", "surrogatepass")
