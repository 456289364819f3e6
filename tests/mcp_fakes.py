"""Small real implementations of the feature contract's SessionView, RequestContext and ServerHub.

Features are unit-tested against these (no transport): a session records what it is sent and
lets a test await the next notification; a context answers server→client requests from a
table of scripted answers, as a client would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio

from memento.app import App
from memento.mcp.features import Feature
from memento.mcp.jsonrpc import JsonRpcError


@dataclass(eq=False)
class FakeSession:
    id: str
    protocol_version: str | None = "2025-11-25"
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    log_level: str = "info"
    state: dict[str, Any] = field(default_factory=dict)
    delivers: bool = True
    sent: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    _arrived: anyio.Event = field(default_factory=anyio.Event)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        self.sent.append((method, params))
        self._arrived.set()

    async def wait_for(self, method: str, count: int = 1, timeout_s: float = 5.0) -> list[dict[str, Any]]:
        """The params of the first `count` notifications named `method`, waiting (bounded)."""
        with anyio.fail_after(timeout_s):
            while len(self.of(method)) < count:
                self._arrived = anyio.Event()
                await self._arrived.wait()
        return self.of(method)[:count]

    def of(self, method: str) -> list[dict[str, Any]]:
        return [p for m, p in self.sent if m == method]


Answer = dict[str, Any] | JsonRpcError | Callable[[dict[str, Any]], dict[str, Any]]


class FakeContext:
    """One request of `session`; `answers` maps server→client methods to the client's reply."""

    def __init__(
        self,
        session: FakeSession,
        *,
        version: str | None = None,
        meta: dict[str, Any] | None = None,
        answers: dict[str, Answer] | None = None,
        request_id: str | int = 1,
    ) -> None:
        self.session = session
        self.request_id = request_id
        self.version = version or session.protocol_version or "2025-11-25"
        self.meta = meta or {}
        self.cancelled = anyio.Event()
        self.answers = answers or {}
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.notes: list[tuple[str, dict[str, Any]]] = []
        self.closed_streams = 0

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        self.notes.append((method, params))

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        if "progressToken" in self.meta:
            await self.notify(
                "notifications/progress",
                {"progressToken": self.meta["progressToken"], "progress": progress, "total": total, "message": message},
            )

    async def log(self, level: str, data: Any, logger: str = "memento") -> None:
        await self.notify("notifications/message", {"level": level, "logger": logger, "data": data})

    async def request(self, method: str, params: dict[str, Any], timeout_s: float = 60.0) -> dict[str, Any]:
        self.requests.append((method, params))
        answer = self.answers.get(method)
        if answer is None:
            raise JsonRpcError(-32601, f"client has no handler for {method}")
        if isinstance(answer, JsonRpcError):
            raise answer
        return answer(params) if callable(answer) else answer

    async def close_stream(self, retry_ms: int | None = None) -> bool:
        self.closed_streams += 1
        return False  # like stdio: no resumable stream to close


class FakeHub:
    def __init__(self, app: App, sessions: Iterable[FakeSession] = ()) -> None:
        self.app = app
        self.live = list(sessions)

    def sessions(self) -> list[FakeSession]:
        return list(self.live)


def attach_all(hub: FakeHub, *features: Feature) -> None:
    for feature in features:
        feature.attach(hub)
