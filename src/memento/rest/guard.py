"""The REST API's front door: the same gate as /mcp (Origin/Host checks, then the bearer credential:
access key, named key or OAuth token), and read-only credentials refused on every write — before
the request reaches a route, so a refusal never depends on the body being valid.

The principal travels in the ASGI scope's state; `call_context` turns it into the service's
CallContext (an `agent_id` query parameter narrows an admin credential to one agent).
"""

from __future__ import annotations

from dataclasses import replace

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from ..auth.principal import Principal
from ..endpoint import RequestGate
from ..errors import Forbidden
from ..models import MAINTENANCE_AGENTS, CallContext
from .problems import from_gate, problem

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
PRINCIPAL = "memento_principal"


class RestGuard:
    """ASGI middleware in front of the FastAPI app: guard, authenticate, refuse read-only writes."""

    def __init__(self, app: ASGIApp, gate: RequestGate, *, public: frozenset[str] = frozenset()) -> None:
        self.app = app
        self.gate = gate
        self.public = public  # paths under the mount anyone may read (the OpenAPI document)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refused = self.gate.guard(request)
        if refused is not None:
            await from_gate(refused)(scope, receive, send)
            return
        if _local_path(scope) in self.public and request.method in SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        principal = self.gate.authenticate(request)
        if not isinstance(principal, Principal):
            await from_gate(principal)(scope, receive, send)
            return
        if principal.read_only and request.method not in SAFE_METHODS:
            refusal = from_gate(self.gate.forbidden(request, "this credential is read-only: it may not change memory"))
            await refusal(scope, receive, send)
            return
        scope.setdefault("state", {})[PRINCIPAL] = principal
        await self.app(scope, receive, send)


def _local_path(scope: Scope) -> str:
    path = str(scope.get("path", ""))
    root = str(scope.get("root_path", ""))
    return path[len(root) :] if root and path.startswith(root) else path


def principal_of(request: Request) -> Principal:
    found = request.scope.get("state", {}).get(PRINCIPAL)
    if not isinstance(found, Principal):  # RestGuard always sets it; a route mounted without it is a bug
        raise RuntimeError("REST route reached without the guard")
    return found


def is_admin(principal: Principal) -> bool:
    return principal.agent_id is None or principal.agent_id in MAINTENANCE_AGENTS


def call_context(principal: Principal, agent_id: str | None) -> CallContext:
    """The service context of a REST call; `agent_id` may narrow an admin credential to one agent
    and is refused for another agent's credential."""
    ctx = principal.call_context(None)
    if agent_id is None or agent_id == principal.agent_id:
        return ctx
    if not is_admin(principal):
        raise Forbidden(f"this credential may not act as agent {agent_id!r}")
    return replace(ctx, agent_id=agent_id)


__all__ = ["RestGuard", "call_context", "principal_of", "problem"]
