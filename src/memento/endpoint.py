"""What the operations and OAuth routes need of the MCP endpoint they sit beside, as typed
protocols defined below both (so `ops` and `auth` never hold an untyped handle into `mcp`).

The composition root (`memento.web`) hands them the endpoint. A missing guard is a start-up
error, never an open door: `require_gate` refuses anything that is not a complete RequestGate.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from starlette.requests import Request
from starlette.responses import Response

from .auth.principal import Principal
from .errors import MementoError


class MissingGuard(MementoError):
    """A route was composed without its Origin/Host guard or authenticator."""

    code = "missing_guard"


@runtime_checkable
class RequestGate(Protocol):
    """The HTTP checks every endpoint shares (mcp/http_gate.HttpGate implements them)."""

    def guard(self, request: Request) -> Response | None:
        """403 for a foreign Origin or Host (DNS rebinding); None when the request may go on."""
        ...

    def authenticate(self, request: Request) -> Principal | Response:
        """The request's principal, or the refusal (401/400/503)."""
        ...

    def forbidden(self, request: Request, message: str) -> Response:
        """403 for a valid credential that may not do this."""
        ...


@runtime_checkable
class ServedEndpoint(Protocol):
    """An MCP endpoint as operations see it: its gate and its live sessions."""

    @property
    def gate(self) -> RequestGate: ...

    def session_counts(self) -> dict[str, int]:
        """Live sessions per transport: {"streamable_http": n, "legacy_sse": m}."""
        ...


def require_gate(gate: object, where: str) -> RequestGate:
    """`gate` when it is a complete RequestGate; else MissingGuard (the server does not start)."""
    if gate is None or not isinstance(gate, RequestGate):
        raise MissingGuard(f"{where}: refusing to start without an Origin/Host guard and authenticator")
    return gate
