"""Elicitation before a destructive forget, the sampling helper, and the conformance fixtures
(the tests with a store run on SQLite and on PostgreSQL + Redis)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp_fakes import FakeContext, FakeHub, FakeSession

from memento.app import App, build_app
from memento.errors import Unavailable
from memento.mcp.client_features import confirm_forget, sample
from memento.mcp.fixtures import FIXTURE_PROMPTS, FIXTURE_RESOURCES, FIXTURE_TEMPLATES, FIXTURE_TOOLS, FIXTURE_TOOLS_BY_NAME, install
from memento.mcp.jsonrpc import JsonRpcError
from memento.mcp.prompts import PromptsFeature
from memento.mcp.registry import default_features
from memento.mcp.resources import ResourcesFeature
from memento.mcp.server import McpServer
from memento.models import CallContext, FragmentType, RememberInput
from memento.settings import Settings

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres+redis")]
ELICIT: dict[str, Any] = {"elicitation": {}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def remember(app: App, content: str, topic: str = "scratch", type_: FragmentType = FragmentType.EPISODE) -> str:
    return str(app.service.remember(RememberInput(content=content, topic=topic, type=type_), CallContext()).id)


def answer(action: str, confirm: bool | None = None) -> dict[str, Any]:
    reply: dict[str, Any] = {"action": action}
    if confirm is not None:
        reply["content"] = {"confirm": confirm}
    return {"elicitation/create": reply}


async def test_forget_asks_and_proceeds_when_the_user_confirms(app: App) -> None:
    remember(app, "temporary note one")
    remember(app, "temporary note two")
    ctx = FakeContext(FakeSession("s1", client_capabilities=ELICIT), answers=answer("accept", True))
    assert await confirm_forget(ctx, app, {"topic": "scratch"}) is None
    ((method, params),) = ctx.requests
    assert method == "elicitation/create" and params["mode"] == "form"
    assert "2 fragments" in params["message"] and params["requestedSchema"]["properties"]["confirm"]["type"] == "boolean"


@pytest.mark.parametrize(
    "reply", [answer("decline"), answer("cancel"), answer("accept", False), {"elicitation/create": JsonRpcError(-32600, "no")}]
)
async def test_forget_is_refused_unless_confirmed(app: App, reply: dict[str, Any]) -> None:
    fid = remember(app, "temporary note")
    ctx = FakeContext(FakeSession("s1", client_capabilities=ELICIT), answers=reply)
    result = await confirm_forget(ctx, app, {"id": fid})
    assert result is not None and result["isError"] is True
    assert result["content"][0]["text"].startswith("Error (cancelled): ")


async def test_no_question_without_the_capability_with_force_or_when_nothing_would_go(app: App) -> None:
    fid = remember(app, "temporary note")
    perm = remember(app, "We chose Postgres", topic="arch", type_=FragmentType.DECISION)
    plain = FakeContext(FakeSession("s1"))
    assert await confirm_forget(plain, app, {"id": fid}) is None
    asking = FakeContext(FakeSession("s2", client_capabilities=ELICIT), answers=answer("decline"))
    assert await confirm_forget(asking, app, {"id": fid, "force": True}) is None
    assert await confirm_forget(asking, app, {"topic": "empty-topic"}) is None
    assert await confirm_forget(asking, app, {"id": perm}) is None  # refused by the service anyway
    assert await confirm_forget(asking, app, {"id": "missing"}) is None
    assert asking.requests == []


async def test_url_only_elicitation_clients_are_not_asked(app: App) -> None:
    fid = remember(app, "temporary note")
    ctx = FakeContext(FakeSession("s1", client_capabilities={"elicitation": {"url": {}}}), answers=answer("decline"))
    assert await confirm_forget(ctx, app, {"id": fid}) is None


async def test_sample_returns_the_clients_completion() -> None:
    reply = {"role": "assistant", "content": {"type": "text", "text": "42"}, "model": "m"}
    ctx = FakeContext(FakeSession("s1", client_capabilities={"sampling": {}}), answers={"sampling/createMessage": reply})
    assert await sample(ctx, "meaning of life?", system="be brief") == "42"
    ((_, params),) = ctx.requests
    assert params["messages"][0]["content"]["text"] == "meaning of life?" and params["systemPrompt"] == "be brief"


async def test_sample_without_the_capability_is_unavailable() -> None:
    with pytest.raises(Unavailable):
        await sample(FakeContext(FakeSession("s1")), "hi")


async def _served_surface(settings: Settings) -> dict[str, set[str]]:
    """The names a client discovers on a server built as every transport builds it."""
    built = build_app(settings)
    try:
        server = McpServer(built, features=default_features(built.settings))
        session = server.create_session()
        sink_messages: list[dict[str, Any]] = []

        async def sink(message: dict[str, Any]) -> None:
            sink_messages.append(message)

        async def listed(method: str, key: str, field: str) -> set[str]:
            names: set[str] = set()
            params: dict[str, Any] = {}
            for request_id in range(2, 100):  # pages, bounded
                reply = await server.handle({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, session, sink)
                assert isinstance(reply, dict) and "result" in reply, reply
                names |= {str(item[field]) for item in reply["result"][key]}
                if not reply["result"].get("nextCursor"):
                    return names
                params = {"cursor": reply["result"]["nextCursor"]}
            raise AssertionError(f"{method} kept paging")

        init = await server.handle(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
            },
            session,
            sink,
        )
        assert isinstance(init, dict) and "result" in init, init
        await server.handle({"jsonrpc": "2.0", "method": "notifications/initialized"}, session, sink)
        return {
            "tools": await listed("tools/list", "tools", "name"),
            "resources": await listed("resources/list", "resources", "uri"),
            "templates": await listed("resources/templates/list", "resourceTemplates", "uriTemplate"),
            "prompts": await listed("prompts/list", "prompts", "name"),
        }
    finally:
        built.close()


async def test_fixtures_are_off_by_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fixtures = {
        "tools": {t.name for t in FIXTURE_TOOLS if not t.stateless_only},  # listed at 2026-07-28 only (test_mrtr.py)
        "resources": {r.uri for r in FIXTURE_RESOURCES},
        "templates": {t.uri_template for t in FIXTURE_TEMPLATES},
        "prompts": {p.name for p in FIXTURE_PROMPTS},
    }
    assert all(fixtures.values())
    store = {"DATABASE_URL": f"sqlite:///{tmp_path / 'm.db'}", "EMBEDDING_PROVIDER": "hash"}

    monkeypatch.delenv("MEMENTO_CONFORMANCE_FIXTURES", raising=False)
    assert Settings().conformance_fixtures is False
    off = await _served_surface(Settings(**store))  # type: ignore[arg-type]
    assert off["tools"] and off["resources"] and off["prompts"]  # the real surface is there
    for kind, names in fixtures.items():
        assert not names & off[kind], f"conformance fixture {kind} served by default"
    assert not any(uri.startswith("test://") for uri in off["resources"] | off["templates"])
    assert not any(name.startswith("test_") for name in off["tools"] | off["prompts"])

    monkeypatch.setenv("MEMENTO_CONFORMANCE_FIXTURES", "1")
    assert Settings().conformance_fixtures is True
    on = await _served_surface(Settings(**store))  # type: ignore[arg-type]
    for kind, names in fixtures.items():
        assert names <= on[kind], f"conformance fixture {kind} missing when enabled"
    assert off["tools"] <= on["tools"] and off["prompts"] <= on["prompts"]  # in addition to the real surface


async def test_fixture_tools_answer_as_the_suite_expects() -> None:
    session = FakeSession("s1", client_capabilities={"sampling": {}, "elicitation": {}})
    ctx = FakeContext(
        session,
        meta={"progressToken": "p1"},
        answers={
            "sampling/createMessage": {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"},
            "elicitation/create": {"action": "accept", "content": {"username": "u", "email": "e"}},
        },
    )
    tools = FIXTURE_TOOLS_BY_NAME
    assert (await tools["test_simple_text"].call(ctx, {}))["content"][0]["text"] == "This is a simple text response for testing."
    assert (await tools["test_error_handling"].call(ctx, {}))["isError"] is True
    await tools["test_tool_with_progress"].call(ctx, {})
    assert [p["progress"] for m, p in ctx.notes if m == "notifications/progress"] == [0, 50, 100]
    await tools["test_tool_with_logging"].call(ctx, {})
    assert len([m for m, _ in ctx.notes if m == "notifications/message"]) == 3
    assert (await tools["test_sampling"].call(ctx, {"prompt": "x"}))["content"][0]["text"] == "LLM response: hi"
    elicited = await tools["test_elicitation"].call(ctx, {"message": "who?"})
    assert elicited["content"][0]["text"].startswith("User response: action=accept")
    schema = tools["json_schema_2020_12_tool"].definition("2025-11-25")["inputSchema"]
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema" and schema["additionalProperties"] is False


async def test_fixture_resources_and_prompts_join_their_features(app: App) -> None:
    resources, prompts = ResourcesFeature(), PromptsFeature()
    install(resources, prompts)
    session = FakeSession("s1")
    hub = FakeHub(app, [session])
    resources.attach(hub)
    prompts.attach(hub)
    ctx = FakeContext(session)
    read = await resources.handlers()["resources/read"](ctx, {"uri": "test://template/123/data"})
    assert read["contents"][0]["text"] == '{"id":"123","templateTest":true,"data":"Data for ID: 123"}'
    binary = await resources.handlers()["resources/read"](ctx, {"uri": "test://static-binary"})
    assert binary["contents"][0]["mimeType"] == "image/png" and binary["contents"][0]["blob"]
    got = await prompts.handlers()["prompts/get"](
        ctx, {"name": "test_prompt_with_arguments", "arguments": {"arg1": "hello", "arg2": "world"}}
    )
    assert got["messages"][0]["content"]["text"] == "Prompt with arguments: arg1='hello', arg2='world'"
