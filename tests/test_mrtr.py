"""Multi round-trip requests at MCP 2026-07-28 (mcp/mrtr.py): the forget confirmation and the
client's model as `input_required` rounds, the sealed `requestState` (tampered, expired, another
caller's: refused, nothing done), and the conformance fixtures' rounds. Run at the McpServer
level with a 2026-07-28 session (what the stateless dispatch builds from `_meta`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
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
