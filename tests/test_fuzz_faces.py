"""Fuzzing the tools of the newer faces (seed 001's `entity`, seed 002's `vault`, seed 003's
`protocol`) through the MCP tool-call path on a real SQLite store: any arguments — each tool's own parameter names holding
well-typed values most of the time, any JSON otherwise — get a tool result that is either success
or a clean error with a code (002's bulk-prune refusal: the JSON-RPC invalid-params error); never
the `internal` error of an unexpected exception."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fuzz_strategies import fuzz_settings, json_values, likely, texts
from hypothesis import given
from hypothesis import strategies as st

from memento.app import App, build_app
from memento.embeddings.hashing import HashEmbedder
from memento.mcp.jsonrpc import INVALID_PARAMS, JsonRpcError
from memento.mcp.tools import ToolSpec, call_tool
from memento.mcp.toolsets import REGISTRY
from memento.models import CallContext
from memento.settings import Settings

SPECS = {spec.name: spec for spec in REGISTRY.select("entity,vault,protocol")}
VERSION = "2025-11-25"
NAMES = ["Alice", "Bob", "Frontend Team", "ÉLAN", "x" * 300, ""]
GOOD: dict[str, st.SearchStrategy[Any]] = {
    "content": texts.filter(str.strip) | st.sampled_from(["User prefers dark mode", "The standup is at 9:30"]),
    "query": texts | st.sampled_from(['"dark mode"', "mode*", "a OR b", "NOT x", "(a AND", "key:user", "NEAR(a b)", "*", '"']),
    "key": texts | st.sampled_from(["k1", "user_pref"]),
    "scope": st.sampled_from(["session", "vault", "all", "other"]),
    "search_mode": st.sampled_from(["keyword", "semantic", "hybrid", "graph", "fuzzy"]),
    "memory_type": st.sampled_from(["observation", "decision", "fact", "nope"]),
    "memory_types": st.lists(st.sampled_from(["observation", "decision", "bogus"]), max_size=3),
    "tags": st.lists(texts, max_size=3),
    "entity_names": st.lists(st.sampled_from(NAMES) | texts, max_size=3),
    "entity_name": st.sampled_from(NAMES) | texts,
    "confidence": st.floats(-1, 2, allow_nan=False),
    "min_confidence": st.floats(-1, 2, allow_nan=False),
    "strength": st.floats(-1, 2, allow_nan=False),
    "limit": st.integers(-5, 150),
    "offset": st.integers(-5, 10**7),
    "depth": st.integers(-1, 7),
    "before_date": st.sampled_from(["2020-01-01T00:00:00Z", "not a date", "2099-01-01"]),
    "after_date": st.sampled_from(["2020-01-01T00:00:00Z", "yesterday"]),
    "older_than": st.sampled_from(["2020-01-01T00:00:00Z", "nope"]),
    "embedding": st.lists(st.floats(-1, 1, allow_nan=False), max_size=8),
    "query_embedding": st.lists(st.floats(-1, 1, allow_nan=False), max_size=8),
    "entities": st.lists(st.fixed_dictionaries({"name": st.sampled_from(NAMES) | texts, "entity_type": texts}), max_size=3),
    "relations": st.lists(
        st.fixed_dictionaries(
            {"source": st.sampled_from(NAMES), "target": st.sampled_from(NAMES), "relation_type": texts},
            optional={"strength": st.floats(-1, 2, allow_nan=False)},
        ),
        max_size=3,
    ),
    "memory_ids": st.lists(st.sampled_from(["frag-0000000000000000"]) | texts, max_size=3),
    "similarity_threshold": st.floats(-1, 2, allow_nan=False),
    "dry_run": st.booleans(),
}


@st.composite
def calls(draw: st.DrawFn) -> tuple[ToolSpec, dict[str, Any]]:
    spec = SPECS[draw(st.sampled_from(sorted(SPECS)))]
    own = sorted(spec.input_schema().get("properties", {}))
    fields = draw(st.lists(st.sampled_from(own) | texts if own else texts, max_size=6))
    return spec, {f: draw(GOOD.get(f, json_values) if draw(likely) else json_values) for f in fields}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    folder: Path = tmp_path_factory.mktemp("fuzz-faces")
    built = build_app(Settings(DATABASE_URL=f"sqlite:///{folder / 'm.db'}", EMBEDDING_PROVIDER="hash"), embedder=HashEmbedder(64))
    yield built
    built.close()


@fuzz_settings(factor=3)
@given(call=calls())
def test_any_arguments_get_a_result_or_a_clean_error(app: App, call: tuple[ToolSpec, dict[str, Any]]) -> None:
    spec, arguments = call
    ctx = CallContext(session_id="fuzz-session")
    try:
        result = asyncio.run(call_tool(spec, arguments, app.service, ctx, VERSION))
    except JsonRpcError as exc:  # 002's bulk-vault-prune refusal is a protocol error, as the seed asks
        assert exc.code == INVALID_PARAMS and spec.name == "prune_memory", (spec.name, arguments, exc)
        return
    text = result["content"][0]["text"]
    if result.get("isError"):
        assert not text.startswith("Error (internal)"), (spec.name, arguments, text)
        assert text.startswith("Error ("), text
    else:
        json.loads(text)
