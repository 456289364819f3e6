"""The contract between the protocol core and the features that plug into it.

The core (server.py and the transports) owns sessions, framing, ids, the event store and
delivery. A feature (resources, prompts, completion, tasks, ...) contributes methods,
notification handlers and capabilities, and talks to the client only through the context
objects below — never through a transport.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import anyio

    from memento.app import App


class SessionView(Protocol):
    """What a feature may know about and do with a session."""

    id: str
    protocol_version: str | None
    client_capabilities: dict[str, Any]
    log_level: str  # set by logging/setLevel; "info" until then
    state: dict[str, Any]
    """Per-session feature state (JSON values, e.g. resource subscriptions). With several
    replicas it travels with the session: saved after every request, seen by every replica."""
    delivers: bool
    """Whether this process delivers the session's unsolicited notifications (False when
    another replica holds its notification stream): features notify only where it is True."""

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification not tied to any request (GET stream / stdout / legacy SSE)."""
        ...


class RequestContext(Protocol):
    """One request being answered: its session, id, metadata and a channel back to the client.

    The data members are read-only to a feature (properties here, so that an implementation
    may hold a more specific session type, as the tests' fakes do)."""

    @property
    def session(self) -> SessionView: ...
    @property
    def request_id(self) -> str | int: ...
    @property
    def version(self) -> str: ...
    @property
    def meta(self) -> dict[str, Any]:
        """params["_meta"], {} when absent."""
        ...

    @property
    def cancelled(self) -> anyio.Event:
        """Set when notifications/cancelled names this request."""
        ...

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification related to this request (on its SSE stream when it has one)."""
        ...

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """notifications/progress when the request carried a progressToken; otherwise nothing."""
        ...

    async def log(self, level: str, data: Any, logger: str = "memento") -> None:
        """notifications/message, when `level` is at or above the session's log level."""
        ...

    async def request(self, method: str, params: dict[str, Any], timeout_s: float = 60.0) -> dict[str, Any]:
        """A server→client request (sampling/createMessage, elicitation/create, roots/list).

        Raises JsonRpcError when the client answers with an error, TimeoutError on timeout.
        Only call it for capabilities the client declared (see session.client_capabilities).
        """
        ...

    async def close_stream(self, retry_ms: int | None = None) -> bool:
        """End the connection this request's messages flow on, without ending the request
        (SSE polling, SEP-1699): the client reconnects (GET + Last-Event-ID, after `retry_ms`
        when given, else the stream's `retry`) and is sent what was sent meanwhile, the
        response included. Only a resumable stream can be closed — Streamable HTTP from
        2025-11-25, whose streams open with a priming event id; elsewhere (stdio, legacy SSE,
        older sessions, batches) it does nothing and returns False.
        """
        ...


Handler = Callable[[RequestContext, dict[str, Any]], Awaitable[dict[str, Any]]]
NotificationHandler = Callable[[SessionView, dict[str, Any]], Awaitable[None]]


class ServerHub(Protocol):
    """What a feature may ask of the core beyond one request."""

    @property
    def app(self) -> App: ...

    def sessions(self) -> Sequence[SessionView]:
        """The live sessions (a snapshot: a feature does not add or remove sessions)."""
        ...


class Feature(Protocol):
    """A module's contribution to the server, registered once at start-up."""

    def capabilities(self, version: str) -> dict[str, Any]:
        """Merged into the initialize result's capabilities for a session of `version`."""
        ...

    def handlers(self) -> Mapping[str, Handler]:
        """Request methods this feature answers (e.g. "resources/read")."""
        ...

    def notification_handlers(self) -> Mapping[str, NotificationHandler]:
        """Client notifications this feature consumes."""
        ...

    def attach(self, hub: ServerHub) -> None:
        """Called once when the server starts; keep the hub to reach sessions later."""
        ...
