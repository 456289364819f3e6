"""Toolsets (MEMENTO_TOOLSETS): the registry, its selection rules, and the served tools/list over
stdio and Streamable HTTP with the official client."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_helpers import SERVE, TIMEOUT_S, TOOL_NAMES, server_env, start_http_server

from memento.errors import InvalidArgument
from memento.mcp import toolsets, versions
from memento.mcp.tools import TOOLS, ToolSpec
from memento.mcp.toolsets import REGISTRY, Toolset, ToolsetRegistry, list_tokens, tool_definitions
from memento.models import MemoryStatsInput
from memento.results import StatsResult
from memento.service import MemoryService

ELEVEN = TOOL_NAMES  # seed 000's eleven and 004's six: the public contract, hard-coded in mcp_helpers
DOCS = Path(__file__).resolve().parent.parent / "docs" / "toolsets.md"


def extra_tool(name: str) -> ToolSpec:
    return ToolSpec(name, name.title(), f"The {name} tool.", MemoryStatsInput, MemoryService.memory_stats, StatsResult)


# Seed 004 §5.1's tools beyond the names it shares with 000 (remember, recall, forget, link).
SEED_004 = {"pin", "unpin", "restore", "verify_erasure", "export", "feedback"}


def test_the_default_toolset_is_seeds_000_eleven_tools_and_004s() -> None:
    names = [spec.name for spec in REGISTRY.select("")]
    assert set(names) == ELEVEN | SEED_004
    assert {spec.name for spec in REGISTRY.select("memento")} == ELEVEN | SEED_004
    assert REGISTRY.names()[0] == "memento"


def test_selection_is_a_comma_list_in_registration_order_and_all_shows_everything() -> None:
    registry = ToolsetRegistry(
        [
            Toolset("memento", "000", TOOLS),
            Toolset("entity", "001", (extra_tool("store_memory"), extra_tool("recall_memories"))),
            Toolset("vault", "002", (extra_tool("commit_memory"),)),
        ]
    )
    assert [s.name for s in registry.select("vault, entity")] == ["store_memory", "recall_memories", "commit_memory"]
    assert len(registry.select("all")) == len(TOOLS) + 3 == len(registry.select("memento,all"))
    assert registry.select("entity,entity") == registry.select("entity") == registry.select(" Entity ")
    assert registry.select("ALL") == registry.select("all")


def test_unknown_toolsets_are_refused_with_the_known_ones_named() -> None:
    with pytest.raises(InvalidArgument, match=r"unknown toolset\(s\) entiti, bogus; known: memento, entity, vault, protocol, all"):
        REGISTRY.select("memento,entiti,bogus")


def test_tool_names_never_collide_across_toolsets() -> None:
    registry = ToolsetRegistry([Toolset("memento", "000", TOOLS)])
    with pytest.raises(ValueError, match=r"reuses tool names: recall \(in memento\)"):
        registry.register(Toolset("other", "x", (extra_tool("recall"),)))
    with pytest.raises(ValueError, match="already registered"):
        registry.register(Toolset("memento", "again", ()))
    with pytest.raises(ValueError, match="reserved"):
        registry.register(Toolset("all", "x", ()))
    with pytest.raises(ValueError, match="twice"):
        registry.register(Toolset("twice", "x", (extra_tool("a"), extra_tool("a"))))
    assert registry.names() == ["memento"]  # a refused registration leaves nothing behind


def test_the_documented_token_costs_are_the_measured_ones() -> None:
    """docs/toolsets.md lists every toolset's tools/list cost; the figures must be current."""
    text = DOCS.read_text(encoding="utf-8")
    for name in REGISTRY.names():
        row = re.search(rf"^\| `{name}` \|(.+)$", text, re.MULTILINE)
        assert row is not None, f"docs/toolsets.md has no row for {name}"
        cells = [c.strip() for c in row.group(1).split("|")]
        tools = REGISTRY.get(name).tools
        assert int(cells[0]) == len(tools)
        figures = [int(c.replace(",", "")) for c in cells[1 : 1 + len(versions.REVISIONS)]]
        assert figures == [list_tokens(tools, v) for v in versions.REVISIONS], f"re-measure {name}: python bench/toolsets.py"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _listed_over_stdio(env: dict[str, str]) -> set[str]:
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--transport", "stdio"], env=env)
    async with Client(params, read_timeout_seconds=TIMEOUT_S) as client:
        return await _every_tool(client)


async def _every_tool(client: Client) -> set[str]:
    """The names of every tools/list page (`all` lists more tools than one page holds), less the
    `session` tool a 2026-07-28 client also gets (mcp/handles.py; tests/test_session_handles.py)."""
    names: set[str] = set()
    cursor = None
    while True:
        page = await client.list_tools(cursor=cursor)
        names |= {tool.name for tool in page.tools}
        cursor = page.next_cursor
        if not cursor:
            assert ("session" in names) == (client.protocol_version == versions.STATELESS)
            return names - {"session"}


@pytest.mark.anyio
@pytest.mark.slow
async def test_memento_toolsets_over_stdio(tmp_path: Path) -> None:
    env = server_env(tmp_path / "store.db")
    assert await _listed_over_stdio({**env, "MEMENTO_TOOLSETS": "memento"}) == ELEVEN
    assert await _listed_over_stdio({**env, "MEMENTO_TOOLSETS": "all"}) == {s.name for s in REGISTRY.select("all")}


@pytest.mark.anyio
@pytest.mark.slow
async def test_memento_toolsets_over_streamable_http(tmp_path: Path) -> None:
    server = start_http_server({**server_env(tmp_path / "store.db"), "MEMENTO_TOOLSETS": "all"}, tmp_path / "server.log")
    try:
        async with Client(server.mcp, read_timeout_seconds=TIMEOUT_S) as client:
            assert await _every_tool(client) == {s.name for s in REGISTRY.select("all")}
            called = await client.call_tool("memory_stats", {})
            assert not called.is_error
    finally:
        server.stop()


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_an_unknown_toolset_stops_the_server_with_a_clear_message(tmp_path: Path, transport: str) -> None:
    env = {**os.environ, **server_env(tmp_path / "store.db"), "MEMENTO_TOOLSETS": "memento,entiti"}
    done = subprocess.run(
        [*SERVE, "--transport", transport, "--host", "127.0.0.1", "--port", "0"]
        if transport == "http"
        else [*SERVE, "--transport", "stdio"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "unknown toolset(s) entiti; known: memento, entity, vault, protocol, all" in done.stderr.decode()
    assert "Traceback" not in done.stderr.decode()
    assert not (tmp_path / "store.db").exists()  # refused before anything was opened


# cl100k tokens of the default toolset's tools/list: issue 15 held 000's eleven tools to 2,000;
# seed 004's tools joined the same toolset (issue 11: pin, unpin, restore, verify_erasure, export,
# feedback, and 004's parameters on remember/recall/forget): 17 tools, and the budget grew with them;
# issue 13 added summarize_thread (004 §5.1, about 110 tokens), memory_consolidate's stages and
# dryRun, and 004's derived_from/duplicates link types.
TOOLS_LIST_TARGET = 3_000
# At 2026-07-28 there is no protocol session: the `session` tool and the `session` argument of the
# tools that read working memory (mcp/handles.py) carry what the handshake revisions keep in the
# session, and the budget grows by what they cost (about 120 tokens) and no more.
STATELESS_ALLOWANCE = 100


def test_the_default_tools_list_fits_its_token_target_at_every_revision() -> None:
    tools = REGISTRY.select("")
    figures = {v: list_tokens(tools, v) for v in versions.REVISIONS}  # 2026-07-28 too: its session tool and argument count
    print("\ntools/list tokens per toolset and revision (cl100k):")
    for name in REGISTRY.names():
        per = ", ".join(f"{v} {list_tokens(REGISTRY.get(name).tools, v):,}" for v in versions.REVISIONS)
        print(f"  {name}: {per}")
    assert max(n for v, n in figures.items() if v != versions.STATELESS) <= TOOLS_LIST_TARGET, figures
    assert figures[versions.STATELESS] <= TOOLS_LIST_TARGET + STATELESS_ALLOWANCE, figures


def _properties(schema: dict[str, Any], where: str) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for name, prop in schema.get("properties", {}).items():
        found.append((f"{where}.{name}", prop))
        found += _properties(prop, f"{where}.{name}")
        if isinstance(prop.get("items"), dict):
            found += _properties(prop["items"], f"{where}.{name}[]")
    return found


# Each face keeps its seed's casing: 000's parameters are camelCase (tokenBudget), 001's snake_case
# as the seed writes them (memory_type, entity_names).
CASING = {
    "memento": re.compile(r"^[a-z][a-zA-Z0-9]*$"),
    "entity": re.compile(r"^[a-z][a-z0-9_]*$"),
    "vault": re.compile(r"^[a-z][a-z0-9_]*$"),
    "protocol": re.compile(r"^[a-z][a-z0-9_]*$"),
}
# 002 §3.2 describes every property but these; its schemas are served exactly (tests/test_vault_mcp.py).
UNDESCRIBED_BY_SEED = {"commit_memory.scope", "prune_memory.scope"}


def test_every_input_property_of_every_tool_is_described_in_its_seeds_casing() -> None:
    assert set(CASING) == set(REGISTRY.names()), "give every toolset its casing rule"
    for toolset in REGISTRY.names():
        for spec in REGISTRY.get(toolset).tools:
            schema = spec.definition("2025-11-25")["inputSchema"]
            for where, prop in _properties(schema, spec.name):
                described = isinstance(prop.get("description"), str) and prop["description"].strip()
                assert described or where in UNDESCRIBED_BY_SEED, f"{where} has no description"
                assert CASING[toolset].match(where.rsplit(".", 1)[-1]), f"{where} is not in the casing of {toolset}"
        assert "$ref" not in json.dumps(schema) and "anyOf" not in json.dumps(schema), spec.name


def test_structured_output_is_opt_in() -> None:
    for spec in TOOLS:
        plain = spec.definition("2025-11-25")
        structured = spec.definition("2025-11-25", structured=True)
        assert "outputSchema" not in plain and structured["outputSchema"]["type"] == "object", spec.name
        assert "outputSchema" not in spec.definition("2025-03-26", structured=True)  # not defined before 2025-06-18
    assert list_tokens(TOOLS, "2025-11-25", structured=True) > list_tokens(TOOLS, "2025-11-25")


def test_tools_list_entries_are_built_once_and_each_caller_gets_its_own_copy() -> None:
    tools = REGISTRY.select("all")
    for version in (*versions.SUPPORTED, versions.STATELESS):
        first = tool_definitions(tools, version)
        first[0]["inputSchema"]["properties"].clear()  # a caller changing its copy (as 2026-07-28's handles do)
        first.append({"name": "intruder"})
        again = tool_definitions(tools, version)
        assert again == toolsets._build_definitions(tools, version, structured=False)  # as built afresh
        assert again[0]["inputSchema"]["properties"] and all(d["name"] != "intruder" for d in again)
        assert tool_definitions(tools, version, structured=True) == toolsets._build_definitions(tools, version, structured=True)
