"""The exception tree. Each face translates these once (tool error, HTTP status, CLI message)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class MementoError(Exception):
    """Base of every error Memento raises on purpose."""

    code = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(MementoError):
    """The caller sent something malformed; nothing was changed."""

    code = "invalid_argument"


class NotFound(MementoError):
    """The named thing does not exist in the caller's namespace. `missing`: the memory ids the
    message names as not found (a face then says where a merge took them: service.explain)."""

    code = "not_found"

    def __init__(
        self, message: str, *, missing: Sequence[str] = (), merged_into: Mapping[str, str] | None = None, explained: bool = False
    ) -> None:
        super().__init__(message)
        self.missing = tuple(missing)
        self.merged_into = dict(merged_into or {})  # {missing id: the memory that absorbed it}, once explained
        self.explained = explained  # the message says why (service.explain): not explained again


class Forbidden(MementoError):
    """The caller may not do this (e.g. forget a permanent fragment without force)."""

    code = "forbidden"


class Conflict(MementoError):
    """The request conflicts with the current state."""

    code = "conflict"


class Unavailable(MementoError):
    """A dependency (database, embedding provider) is not available right now."""

    code = "unavailable"


class InvalidParams(InvalidArgument):
    """An InvalidArgument a seed wants refused by the protocol itself (MCP: a JSON-RPC -32602
    error, e.g. 002's bulk vault prune), not as a tool result; elsewhere it is an InvalidArgument."""


class SessionRequired(InvalidArgument):
    """An InvalidArgument for a call that needs a session (working memory) and has none; a face
    may add how its callers get one (MCP 2026-07-28: a session handle)."""
