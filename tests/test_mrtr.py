"""Multi round-trip requests at MCP 2026-07-28 (mcp/mrtr.py): the forget confirmation and the
client's model as `input_required` rounds, the sealed `requestState` (tampered, expired, another
caller's: refused, nothing done), and the conformance fixtures' rounds. Run at the McpServer
level with a 2026-07-28 session (what the stateless dispatch builds from `_meta`)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memento.app import App
from memento.auth.principal import ANONYMOUS, Principal
from memento.mcp import mrtr, versions
from memento.mcp.client_features import CONFIRM_KEY, MODEL_KEY
from memento.mcp.context import Session
from memento.mcp.jsonrpc import INVALID_PARAMS, JsonRpcError
from memento.mcp.registry import default_features
from memento.mcp.server import McpServer
from memento.mcp.toolsets import selected_tools
from memento.models import DEFAULT_AGENT, AgentScope, CallContext, FragmentType, RememberInput
from memento.storage.protocol import SearchFilter

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres")]
ALL_CAPS: dict[str, Any] = {"elicitation": {}, "sampling": {}, "roots": {}}
SCOPE = AgentScope(DEFAULT_AGENT)
SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Clock:
    """Seconds for the sealer, moved by hand."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def state_clock() -> Clock:
    return Clock()


@pytest.fixture
def server(app: App, state_clock: Clock) -> Iterator[McpServer]:
    built = McpServer(app, tools=selected_tools("all"), features=default_features(app.settings))
    built.request_states = mrtr.RequestStates(app.store, "", 600.0, clock=state_clock)
    built.fixture_tools = built.fixture_tools or ()
    yield built


def session(caps: dict[str, Any] | None = None, principal: Principal = ANONYMOUS) -> Session:
    return Session(
        id="stateless", protocol_version=versions.STATELESS, client_capabilities=ALL_CAPS if caps is None else caps, principal=principal
    )


_ids = iter(range(1, 10_000))


async def call(server: McpServer, sess: Session, method: str, params: dict[str, Any]) -> dict[str, Any]:
    reply = await server.handle({"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}, sess)
    assert isinstance(reply, dict)
    return reply


async def tool(server: McpServer, sess: Session, name: str, arguments: dict[str, Any], **retry: Any) -> dict[str, Any]:
    return await call(server, sess, "tools/call", {"name": name, "arguments": arguments, **retry})


def remember(app: App, content: str, topic: str = "scratch") -> str:
    return str(app.service.remember(RememberInput(content=content, topic=topic, type=FragmentType.EPISODE), CallContext()).id)


def alive(app: App, *ids: str) -> set[str]:
    return {f.id for f in app.store.get_many(SCOPE, list(ids))}


def stored(app: App) -> int:
    return len(app.store.list_fragments(SCOPE, SearchFilter(), 100))


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


# ------------------------------------------------------------------ forget


async def test_forget_at_2026_answers_input_required_and_deletes_nothing(app: App, server: McpServer) -> None:
    fid = remember(app, "temporary note")
    result = (await tool(server, session(), "forget", {"id": fid}))["result"]
    assert result["resultType"] == "input_required"
    question = result["inputRequests"][CONFIRM_KEY]
    assert question["method"] == "elicitation/create" and question["params"]["mode"] == "form"
    assert "Delete?" in question["params"]["message"] and question["params"]["requestedSchema"]["required"] == ["confirm"]
    assert isinstance(result["requestState"], str) and fid not in result["requestState"]  # opaque, nothing readable in it
    assert alive(app, fid) == {fid}


async def test_the_retry_with_the_users_yes_deletes(app: App, server: McpServer) -> None:
    fid = remember(app, "temporary note")
    first = (await tool(server, session(), "forget", {"id": fid}))["result"]
    retry = {"inputResponses": {CONFIRM_KEY: accept(confirm=True)}, "requestState": first["requestState"]}
    done = (await tool(server, session(), "forget", {"id": fid}, **retry))["result"]
    assert done.get("resultType") != "input_required" and done["isError"] is False
    assert alive(app, fid) == set()


@pytest.mark.parametrize("answer", [{"action": "decline"}, {"action": "cancel"}, accept(confirm=False)])
async def test_a_declined_confirmation_deletes_nothing(app: App, server: McpServer, answer: dict[str, Any]) -> None:
    fid = remember(app, "temporary note")
    first = (await tool(server, session(), "forget", {"id": fid}))["result"]
    retry = {"inputResponses": {CONFIRM_KEY: answer}, "requestState": first["requestState"]}
    refused = (await tool(server, session(), "forget", {"id": fid}, **retry))["result"]
    assert refused["isError"] is True and refused["content"][0]["text"].startswith("Error (cancelled): ")
    assert alive(app, fid) == {fid}


async def test_a_yes_without_the_servers_state_is_asked_again(app: App, server: McpServer) -> None:
    fid = remember(app, "temporary note")
    again = (await tool(server, session(), "forget", {"id": fid}, inputResponses={CONFIRM_KEY: accept(confirm=True)}))["result"]
    assert again["resultType"] == "input_required" and CONFIRM_KEY in again["inputRequests"]
    assert alive(app, fid) == {fid}


def _tamper(state: str) -> str:
    version, body, mac = state.split(".")
    payload = json.loads(mrtr._unb64(body))
    payload["d"]["forget"] = "0" * 64
    return ".".join([version, mrtr._b64(json.dumps(payload).encode()), mac])


async def test_tampered_expired_or_foreign_state_is_refused_and_nothing_is_deleted(app: App, server: McpServer, state_clock: Clock) -> None:
    fid = remember(app, "temporary note")
    other = remember(app, "another note")
    state = (await tool(server, session(), "forget", {"id": fid}))["result"]["requestState"]
    yes = {CONFIRM_KEY: accept(confirm=True)}
    cases = {
        "altered payload": (session(), {"id": fid}, _tamper(state)),
        "suffix": (session(), {"id": fid}, state + "-TAMPERED"),
        "not ours": (session(), {"id": fid}, "s1.e30.AAAA"),
        "other caller": (session(principal=Principal("mallory", "mallory")), {"id": fid}, state),
        "other request": (session(), {"id": other}, state),  # the state of one forget on another
    }
    for label, (sess, arguments, sent) in cases.items():
        reply = await tool(server, sess, "forget", arguments, inputResponses=yes, requestState=sent)
        assert reply.get("error", {}).get("code") == INVALID_PARAMS, label
    state_clock.now += 601  # past MEMENTO_STATE_TTL_S
    expired = await tool(server, session(), "forget", {"id": fid}, inputResponses=yes, requestState=state)
    assert expired["error"]["code"] == INVALID_PARAMS and "expired" in expired["error"]["message"]
    assert alive(app, fid, other) == {fid, other}


async def test_a_client_without_elicitation_is_not_asked(app: App, server: McpServer) -> None:
    fid = remember(app, "temporary note")
    done = (await tool(server, session({"sampling": {}}), "forget", {"id": fid}))["result"]
    assert done.get("resultType") != "input_required" and done["isError"] is False
    assert alive(app, fid) == set()


async def test_the_state_one_replica_seals_another_opens(app: App) -> None:
    """Two servers on one database (two replicas) derive the same key: the first stores it."""
    one, two = mrtr.RequestStates(app.store, "", 600.0), mrtr.RequestStates(app.store, "", 600.0)
    params = {"name": "forget", "arguments": {"id": "x"}}
    sealed = (await one.exchange("tools/call", params, ANONYMOUS, ALL_CAPS)).ask({}, {"k": 1})["requestState"]
    opened = await two.exchange("tools/call", {**params, "requestState": sealed}, ANONYMOUS, ALL_CAPS)
    assert opened.state == {"k": 1}
    configured = mrtr.RequestStates(app.store, "a configured secret key", 600.0)
    with pytest.raises(JsonRpcError):  # another key: not ours
        await configured.exchange("tools/call", {**params, "requestState": sealed}, ANONYMOUS, ALL_CAPS)


# ------------------------------------------------------------------ the client's model for drafts

TRANSCRIPT = "user: We decided to bill monthly, never yearly.\nassistant: Noted: monthly billing."


async def test_a_draft_asks_the_clients_model_and_the_retry_uses_its_answer(app: App, server: McpServer) -> None:
    arguments = {"transcript": TRANSCRIPT}
    first = (await tool(server, session(), "memento_extract", arguments))["result"]
    assert first["resultType"] == "input_required"
    asked = first["inputRequests"][MODEL_KEY]
    assert asked["method"] == "sampling/createMessage" and "monthly" in asked["params"]["messages"][0]["content"]["text"]
    assert stored(app) == 0  # the first round stored nothing
    answer = json.dumps([{"content": "Billing is monthly, never yearly", "type": "decision", "tags": []}])
    completion = {"role": "assistant", "content": {"type": "text", "text": answer}, "model": "m", "stopReason": "endTurn"}
    retry = {"inputResponses": {MODEL_KEY: completion}, "requestState": first["requestState"]}
    done = (await tool(server, session(), "memento_extract", arguments, **retry))["result"]
    payload = json.loads(done["content"][0]["text"])
    assert payload["method"] == "sampling" and [m["content"] for m in payload["memories"]] == ["Billing is monthly, never yearly"]


async def test_without_sampling_the_draft_runs_without_a_model(app: App, server: McpServer) -> None:
    done = (await tool(server, session({}), "memento_extract", {"transcript": TRANSCRIPT, "dry_run": True}))["result"]
    assert done.get("resultType") != "input_required" and json.loads(done["content"][0]["text"])["method"] == "heuristic"


# ------------------------------------------------------------------ conformance fixtures (MEMENTO_CONFORMANCE_FIXTURES)


@pytest.fixture
def fixtures(app: App, state_clock: Clock) -> McpServer:
    app.settings = app.settings.model_copy(update={"conformance_fixtures": True})
    built = McpServer(app, features=default_features(app.settings))
    built.request_states = mrtr.RequestStates(app.store, "", 600.0, clock=state_clock)
    return built


async def test_the_fixture_tools_are_listed_at_2026_only(fixtures: McpServer) -> None:
    at_2026 = {t["name"] for t in (await call(fixtures, session(), "tools/list", {}))["result"]["tools"]}
    older = Session(id="old", protocol_version="2025-11-25")
    at_2025 = {t["name"] for t in (await call(fixtures, older, "tools/list", {}))["result"]["tools"]}
    assert {
        "test_input_required_result_elicitation",
        "test_missing_capability",
        "test_streaming_elicitation",
        "test_logging_tool",
    } <= at_2026
    assert "test_simple_text" in at_2025 and not any(name.startswith("test_input_required") for name in at_2025)
    refused = await tool(fixtures, older, "test_input_required_result_elicitation", {})
    assert refused["error"]["code"] == INVALID_PARAMS


async def test_an_elicitation_round_then_the_result(fixtures: McpServer) -> None:
    name = "test_input_required_result_elicitation"
    first = (await tool(fixtures, session(), name, {}))["result"]
    assert first["resultType"] == "input_required" and first["inputRequests"]["user_name"]["method"] == "elicitation/create"
    done = (await tool(fixtures, session(), name, {}, inputResponses={"user_name": accept(name="Alice"), "extra": accept(x=1)}))["result"]
    assert done["content"][0]["text"] == "Hello, Alice!"
    wrong = (await tool(fixtures, session(), name, {}, inputResponses={"wrong_key": accept(data="x")}))["result"]
    assert wrong["resultType"] == "input_required"  # asked again, not an error
    invalid = await tool(fixtures, session(), name, {}, inputResponses={"user_name": 12345})
    assert invalid["error"]["code"] == INVALID_PARAMS


async def test_three_rounds_carry_the_state_forward(fixtures: McpServer) -> None:
    name = "test_input_required_result_multi_round"
    one = (await tool(fixtures, session(), name, {}))["result"]
    assert set(one["inputRequests"]) == {"step1"}
    two = (await tool(fixtures, session(), name, {}, inputResponses={"step1": accept(name="Ada")}, requestState=one["requestState"]))[
        "result"
    ]
    assert set(two["inputRequests"]) == {"step2"} and two["requestState"] != one["requestState"]
    three = await tool(fixtures, session(), name, {}, inputResponses={"step2": accept(color="green")}, requestState=two["requestState"])
    assert three["result"]["content"][0]["text"] == "Hello, Ada! Your favorite color is green."


async def test_state_and_tampering_fixtures(fixtures: McpServer) -> None:
    for name in ("test_input_required_result_request_state", "test_input_required_result_tampered_state"):
        first = (await tool(fixtures, session(), name, {}))["result"]
        ok = await tool(fixtures, session(), name, {}, inputResponses={"confirm": accept(ok=True)}, requestState=first["requestState"])
        assert "state-ok" in ok["result"]["content"][0]["text"]
        bad = await tool(
            fixtures, session(), name, {}, inputResponses={"confirm": accept(ok=True)}, requestState=first["requestState"] + "-TAMPERED"
        )
        assert bad["error"]["code"] == INVALID_PARAMS


async def test_input_requests_follow_the_declared_capabilities(fixtures: McpServer) -> None:
    only_sampling = (await tool(fixtures, session({"sampling": {}}), "test_input_required_result_capabilities", {}))["result"]
    assert [r["method"] for r in only_sampling["inputRequests"].values()] == ["sampling/createMessage"]
    no_sampling: list[dict[str, Any]] = [{}, {"elicitation": {}}]
    for caps in no_sampling:
        missing = await tool(fixtures, session(caps), "test_missing_capability", {})
        assert missing["error"]["code"] == mrtr.MISSING_REQUIRED_CLIENT_CAPABILITY
        assert missing["error"]["data"] == {"requiredCapabilities": {"sampling": {}}}
    roots = await tool(fixtures, session({"sampling": {}}), "test_input_required_result_list_roots", {})
    assert roots["error"]["code"] == mrtr.MISSING_REQUIRED_CLIENT_CAPABILITY  # never asks what the client cannot answer


async def test_several_inputs_in_one_round_and_a_prompt_round(fixtures: McpServer) -> None:
    name = "test_input_required_result_multiple_inputs"
    first = (await tool(fixtures, session(), name, {}))["result"]
    assert set(first["inputRequests"]) == {"user_name", "greeting", "client_roots"}
    greeting = {"role": "assistant", "content": {"type": "text", "text": "Hi"}, "model": "m"}
    partial = {"user_name": accept(name="Bo"), "greeting": greeting}
    again = (await tool(fixtures, session(), name, {}, inputResponses=partial, requestState=first["requestState"]))["result"]
    assert set(again["inputRequests"]) == {"client_roots"}  # only what is missing
    full = {**partial, "client_roots": {"roots": [{"uri": "file:///r", "name": "r"}]}}
    done = (await tool(fixtures, session(), name, {}, inputResponses=full, requestState=again["requestState"]))["result"]
    assert done["content"][0]["text"] == "Hi Bo; roots: file:///r"
    prompt = "test_input_required_result_prompt"
    asked = (await call(fixtures, session(), "prompts/get", {"name": prompt}))["result"]
    assert asked["resultType"] == "input_required" and "user_context" in asked["inputRequests"]
    got = await call(fixtures, session(), "prompts/get", {"name": prompt, "inputResponses": {"user_context": accept(context="c")}})
    assert got["result"]["messages"][0]["content"]["text"] == "Use this context: c"
    for method in ("tools/list", "prompts/list"):
        assert (await call(fixtures, session(), method, {}))["result"].get("resultType") != "input_required"


# ------------------------------------------------------------------ over stdio, a real server process


def _meta(caps: dict[str, Any]) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": versions.STATELESS,
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "test_mrtr", "version": "1"},
    }


@pytest.mark.backends("sqlite")
def test_forget_confirmation_rounds_over_stdio(tmp_path: Path) -> None:
    pytest.importorskip("memento.mcp.stateless", reason="the stateless dispatch (helper core) has not landed")
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'm.db'}", "EMBEDDING_PROVIDER": "hash", "PYTHONPATH": str(SRC)}
    process = subprocess.Popen(
        [sys.executable, "-m", "memento", "serve", "--transport", "stdio"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    lines: queue.Queue[bytes] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in iter(process.stdout.readline, b""):
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()

    def ask(request_id: int, name: str, arguments: dict[str, Any], caps: dict[str, Any], **retry: Any) -> dict[str, Any]:
        params = {"name": name, "arguments": arguments, "_meta": _meta(caps), **retry}
        assert process.stdin is not None
        process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}).encode() + b"\n")
        process.stdin.flush()
        while True:
            message = json.loads(lines.get(timeout=60))
            if message.get("id") == request_id:
                result: dict[str, Any] = message["result"]
                return result

    try:
        kept = json.loads(ask(1, "remember", {"content": "keep me", "topic": "t1", "type": "episode"}, {})["content"][0]["text"])["id"]
        gone = json.loads(ask(2, "remember", {"content": "drop me", "topic": "t2", "type": "episode"}, {})["content"][0]["text"])["id"]
        first = ask(3, "forget", {"id": gone}, ALL_CAPS)
        assert first["resultType"] == "input_required" and CONFIRM_KEY in first["inputRequests"]
        no = {"inputResponses": {CONFIRM_KEY: {"action": "decline"}}, "requestState": first["requestState"]}
        assert ask(4, "forget", {"id": gone}, ALL_CAPS, **no)["isError"] is True
        yes = {"inputResponses": {CONFIRM_KEY: accept(confirm=True)}, "requestState": first["requestState"]}
        done = ask(5, "forget", {"id": gone}, ALL_CAPS, **yes)
        assert done["resultType"] == "complete" and done["isError"] is False
        recalled = ask(6, "recall", {"query": "me"}, {})
        text = recalled["content"][0]["text"]
        assert kept in text and gone not in text
    finally:
        process.terminate()
        process.wait(timeout=30)


async def test_the_evaluator_borrows_no_model_from_a_2026_request(app: App) -> None:
    from memento.mcp.client_features import lend_to_evaluator

    sess = session({"sampling": {}})
    assert lend_to_evaluator(app, sess, lambda s: True) is False
    assert sess.id not in app.sampling


@pytest.mark.backends("sqlite")
@pytest.mark.slow
async def test_the_official_client_drives_the_rounds_over_stdio(tmp_path: Path) -> None:
    """mcp 2.3 negotiates 2026-07-28 and answers input_required rounds with its callbacks:
    the draft gets the client's model, and forget waits for the user's yes."""
    from mcp import Client
    from mcp.client.context import ClientRequestContext
    from mcp.client.stdio import StdioServerParameters
    from mcp_helpers import SERVE, TIMEOUT_S, data, server_env
    from mcp_types import CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult, TextContent

    asked: list[str] = []
    said_yes = {"answer": False}

    async def sampler(context: ClientRequestContext, params: CreateMessageRequestParams) -> CreateMessageResult:
        asked.append(str(params.messages[0].content))
        reply = json.dumps([{"content": "Invoices go out monthly", "type": "decision", "tags": []}])
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text=reply), model="client-model")

    async def elicit(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"confirm": said_yes["answer"]})

    env = {**server_env(tmp_path / "m.db"), "MEMENTO_TOOLSETS": "all"}
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--transport", "stdio"], env=env)
    async with Client(params, read_timeout_seconds=TIMEOUT_S, sampling_callback=sampler, elicitation_callback=elicit) as client:
        drafted = data(await client.call_tool("memento_extract", {"transcript": TRANSCRIPT}))
        assert drafted["method"] == "sampling" and [m["content"] for m in drafted["memories"]] == ["Invoices go out monthly"]
        assert len(asked) == 1 and "monthly" in asked[0]
        fid = data(await client.call_tool("remember", {"content": "scratch note", "topic": "scratch", "type": "episode"}))["id"]
        refused = await client.call_tool("forget", {"id": fid})
        assert refused.is_error and "did not confirm" in str(refused.content[0])
        said_yes["answer"] = True
        assert data(await client.call_tool("forget", {"id": fid}))
        assert len(asked) == 3 and all("Delete?" in q for q in asked[1:])
        gone = await client.call_tool("forget", {"id": fid})  # nothing left to confirm: no question
        assert gone.is_error and len(asked) == 3
