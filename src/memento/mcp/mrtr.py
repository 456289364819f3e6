"""Multi round-trip requests (MCP 2026-07-28): `input_required` results and sealed `requestState`.

At 2026-07-28 a server never sends a request of its own. A `tools/call`, `prompts/get` or
`resources/read` that needs the client's help (a confirmation, a model's completion, the roots)
answers with an `InputRequiredResult` — `inputRequests` keyed by ids we choose, and a
`requestState` — and the client retries the same request with `inputResponses` under those
keys and the state echoed. Nothing is kept between the rounds here: whatever a round must
remember travels in `requestState`, sealed so the client can read nothing into it and change
nothing in it:

- HMAC-SHA256 over the payload, keyed by MEMENTO_STATE_KEY or else a random key kept in the
  database (`SecretStore`), so every replica sharing the database opens what another sealed;
- bound to the request (method, tool/prompt name or URI, a digest of its arguments) and to the
  caller (the principal), so it cannot be replayed on another request or by another caller;
- expiring (MEMENTO_STATE_TTL_S).

A state that fails any check is refused with -32602 and the request does nothing. The round of
the request being answered is an `Exchange`, bound for the handler's duration (`current`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from memento.auth.principal import Principal
from memento.mcp import stateless
from memento.mcp.jsonrpc import INVALID_PARAMS, JsonRpcError

if TYPE_CHECKING:
    from memento.storage.protocol import SecretStore

INPUT_REQUIRED = "input_required"
SUPPORTED_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
"""The only requests that may answer `input_required` (the spec forbids it on any other)."""
CAPABILITY_OF = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}
"""The client capability each kind of input request needs."""
MISSING_REQUIRED_CLIENT_CAPABILITY = stateless.MISSING_REQUIRED_CLIENT_CAPABILITY
SECRET_NAME = "mcp_request_state"
MAX_STATE_CHARS = 65536
_VERSION = "s1"


def missing_capability(*names: str) -> JsonRpcError:
    """-32021: the request needs client capabilities its `_meta` did not declare."""
    return stateless.missing_capability({name: {} for name in names})


def supports(capabilities: Mapping[str, Any], method: str) -> bool:
    """Whether the client declared the capability an input request of `method` needs."""
    cap = capabilities.get(CAPABILITY_OF.get(method, ""))
    if not isinstance(cap, dict):
        return False
    if method == "elicitation/create":  # form mode: `elicitation: {}` or `elicitation: {form: {}}`
        return not cap or "form" in cap
    return True


def elicitation(message: str, schema: dict[str, Any]) -> dict[str, Any]:
    """An `elicitation/create` input request (form mode)."""
    return {"method": "elicitation/create", "params": {"mode": "form", "message": message, "requestedSchema": schema}}


def sampling(prompt: str, *, max_tokens: int, system: str | None = None) -> dict[str, Any]:
    """A `sampling/createMessage` input request for one user prompt."""
    params: dict[str, Any] = {"messages": [{"role": "user", "content": {"type": "text", "text": prompt}}], "maxTokens": max_tokens}
    if system:
        params["systemPrompt"] = system
    return {"method": "sampling/createMessage", "params": params}


def roots() -> dict[str, Any]:
    """A `roots/list` input request."""
    return {"method": "roots/list", "params": {}}


def accepted(response: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The content of an ElicitResult the user accepted, else None (declined, cancelled, absent)."""
    if response is None or response.get("action") != "accept":
        return None
    content = response.get("content")
    return content if isinstance(content, dict) else {}


def sampled_text(response: Mapping[str, Any] | None) -> str | None:
    """The text of a CreateMessageResult, None when it carries none."""
    if response is None:
        return None
    content = response.get("content")
    blocks = content if isinstance(content, list) else [content]
    texts = [b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)]
    return "".join(texts) if texts else None


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def binding(method: str, params: Mapping[str, Any], principal: Principal) -> str:
    """What a state is bound to: the request (method, its target, a digest of its arguments)
    and the caller. A retry must match it exactly."""
    target = params.get("uri") if method == "resources/read" else params.get("name")
    arguments = json.dumps(params.get("arguments") or {}, sort_keys=True, separators=(",", ":"), default=str)
    caller = [principal.kind, principal.subject, principal.agent_id, principal.workspace]
    material = json.dumps([method, target, hashlib.sha256(arguments.encode()).hexdigest(), caller], separators=(",", ":"), default=str)
    return hashlib.sha256(material.encode()).hexdigest()


class Sealer:
    """Seals and opens `requestState` with one key (HMAC-SHA256, expiring, request-bound)."""

    def __init__(self, key: bytes, ttl_s: float, clock: Callable[[], float] = time.time) -> None:
        self._key = key
        self.ttl_s = ttl_s
        self.clock = clock

    def _mac(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())

    def seal(self, bound_to: str, data: Mapping[str, Any]) -> str:
        payload = {"b": bound_to, "e": int(self.clock() + self.ttl_s), "d": dict(data)}
        body = f"{_VERSION}.{_b64(json.dumps(payload, separators=(',', ':')).encode())}"
        return f"{body}.{self._mac(body)}"

    def open(self, token: object, bound_to: str) -> dict[str, Any]:
        """The data sealed in `token`; -32602 when it is not ours, altered, expired or bound elsewhere."""
        if not isinstance(token, str) or len(token) > MAX_STATE_CHARS:
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: requestState must be the string the server sent")
        body, _, mac = token.rpartition(".")
        if not body.startswith(f"{_VERSION}.") or not hmac.compare_digest(mac.encode(), self._mac(body).encode()):
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: requestState failed its integrity check (altered, or not issued here)")
        payload = json.loads(_unb64(body.partition(".")[2]))  # ours: the MAC vouches for it
        if payload.get("b") != bound_to:
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: requestState belongs to another request or caller")
        if payload.get("e", 0) <= self.clock():
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: requestState has expired; send the request again without it")
        data = payload.get("d")
        return data if isinstance(data, dict) else {}


class RequestStates:
    """The server's sealer, its key read once: MEMENTO_STATE_KEY, else the database's."""

    def __init__(self, store: SecretStore, configured_key: str, ttl_s: float, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._configured = configured_key
        self._ttl_s = ttl_s
        self._clock = clock
        self._sealer: Sealer | None = None
        self._lock = anyio.Lock()

    async def sealer(self) -> Sealer:
        if self._sealer is None:
            async with self._lock:
                if self._sealer is None:
                    if self._configured:
                        key = hashlib.sha256(b"memento request state\0" + self._configured.encode()).digest()
                    else:
                        now = datetime.fromtimestamp(self._clock(), UTC)
                        key = await anyio.to_thread.run_sync(partial(self._store.server_secret, SECRET_NAME, secrets.token_bytes(32), now))
                    self._sealer = Sealer(key, self._ttl_s, self._clock)
        return self._sealer

    async def exchange(self, method: str, params: Mapping[str, Any], principal: Principal, capabilities: Mapping[str, Any]) -> Exchange:
        """The round a 2026-07-28 request is in: its `inputResponses` (each must be an object)
        and its opened `requestState` (refused with -32602 when it fails verification)."""
        responses = params.get("inputResponses")
        if responses is None:
            responses = {}
        if not isinstance(responses, dict):
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: inputResponses must be an object keyed by input request id")
        for key, value in responses.items():
            if not isinstance(value, dict):
                raise JsonRpcError(INVALID_PARAMS, f"Invalid params: inputResponses[{key!r}] must be an object (the client's result)")
        sealer = await self.sealer()
        bound_to = binding(method, params, principal)
        token = params.get("requestState")
        state = None if token is None else sealer.open(token, bound_to)
        return Exchange(sealer, bound_to, responses, state, dict(capabilities))


@dataclass(frozen=True)
class Exchange:
    """One round of a multi round-trip request: what the client sent back, and how to ask."""

    sealer: Sealer
    bound_to: str
    responses: dict[str, dict[str, Any]]
    state: dict[str, Any] | None  # the opened requestState; None when the request carried none

    capabilities: dict[str, Any]

    def response(self, key: str) -> dict[str, Any] | None:
        return self.responses.get(key)

    def supports(self, method: str) -> bool:
        return supports(self.capabilities, method)

    def ask(self, requests: Mapping[str, dict[str, Any]], state: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """An InputRequiredResult asking `requests` (-32021 when the client lacks a capability
        one needs), with `state` sealed into `requestState` for the retry."""
        missing = sorted({CAPABILITY_OF[r["method"]] for r in requests.values() if not self.supports(r["method"])})
        if missing:
            raise missing_capability(*missing)
        result: dict[str, Any] = {"resultType": INPUT_REQUIRED}
        if requests:
            result["inputRequests"] = {key: dict(request) for key, request in requests.items()}
        if state is not None:
            result["requestState"] = self.sealer.seal(self.bound_to, state)
        if len(result) == 1:
            raise ValueError("an InputRequiredResult needs inputRequests or requestState")
        return result


class InputNeeded(Exception):
    """Raised where a call cannot go on without the client's input (at 2026-07-28, e.g. a draft
    asking the client's model): the call is abandoned, nothing it began is kept (its
    transaction rolls back), and its request is answered with `result`, an InputRequiredResult;
    the client's retry runs it again from the start with the answer."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__("the call needs the client's input")
        self.result = result


_current: ContextVar[Exchange | None] = ContextVar("memento_mrtr_exchange", default=None)


def current() -> Exchange | None:
    """The round of the 2026-07-28 request being handled; None at older revisions (and on
    requests that cannot answer input_required)."""
    return _current.get()


@contextmanager
def bound(exchange: Exchange | None) -> Iterator[None]:
    """Make `exchange` the current round while a handler runs."""
    token = _current.set(exchange)
    try:
        yield
    finally:
        _current.reset(token)
