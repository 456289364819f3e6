"""The contract between credentials (access keys, OAuth tokens) and the faces that check them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..models import CallContext


@dataclass(frozen=True)
class Principal:
    """An authenticated caller.

    `agent_id` is the namespace the credential is bound to; None means admin (any namespace,
    maintenance scope). `read_only` limits it to search, recall and context (002 §7).
    """

    subject: str  # key name, or OAuth client id
    agent_id: str | None
    read_only: bool = False
    scopes: frozenset[str] = frozenset()
    kind: str = "access_key"  # access_key | oauth | anonymous

    def call_context(self, session_id: str | None) -> CallContext:
        """The service-level context of a call made with this credential."""
        return CallContext(session_id=session_id, agent_id=self.agent_id, read_only=self.read_only)


# Authentication disabled (no key configured, loopback only): full access to every namespace.
ANONYMOUS = Principal(subject="anonymous", agent_id=None, kind="anonymous")


class TokenVerifier(Protocol):
    """Turns a bearer token into a Principal, or None when the token is not one of its own;
    raises `memento.errors.Unavailable` when it cannot tell right now (its store is down)."""

    def verify(self, token: str, *, resource: str | None = None) -> Principal | None: ...
