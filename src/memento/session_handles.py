"""Sessions for MCP 2026-07-28 clients: server-minted handles passed as tool arguments.

At 2026-07-28 there is no protocol session (SEP-2567): state that lives across calls is named
by an explicit handle the server mints. Memento's such state is working memory (000's
`scope=session`, 002's session scope): `open` mints a handle bound to the namespace and the
credential that asked, standing for a fresh working-memory session; a tool called with it works
in that session; `close` ends it exactly as closing an MCP session does (its working memory
summarized, then expunged, `MemoryService.end_session`). A handle unused for its idle time
(SESSION_TTL_MINUTES by default) expires: it is refused from then on, and the lifecycle (or the
next `open`) ends its session the same way.

The handle is a bearer capability: 32 random bytes, never stored (the store keeps its SHA-256),
refused to any other credential or namespace exactly as an unknown one is, so a foreign caller
learns nothing about it.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal, cast

from pydantic import Field, StrictInt

from .access import call_scope
from .errors import Forbidden, InvalidArgument, MementoError, NotFound
from .fields import OperationInput, ShortText
from .models import AgentScope, CallContext
from .results import Omitted, Result
from .storage.handles import SessionHandle, SessionHandleStore

if TYPE_CHECKING:
    from .service import MemoryService

log = logging.getLogger(__name__)

MAX_OPEN = 1000  # open handles one namespace may hold at once (as many as MCP sessions a process holds by default)
MAX_IDLE_MINUTES = 7 * 24 * 60  # the longest idle time a caller may ask for
SWEEP_BATCH = 200  # expired handles one sweep ends
HANDLE_BYTES = 32
SESSION_PREFIX = "h-"  # the working-memory session ids handles stand for


class SessionInput(OperationInput):
    """The `session` tool (MCP 2026-07-28): open, inspect or close a session handle."""

    action: Literal["open", "status", "close"] = Field(description="What to do.")
    session: ShortText | None = Field(default=None, description="Handle (status, close).")
    idleMinutes: StrictInt | None = Field(default=None, ge=1, le=MAX_IDLE_MINUTES, description="Idle expiry (open).")


class SessionResult(Result):
    """A session handle's state; `session` is the handle to pass to other tools (open only)."""

    success: bool = True
    action: Literal["open", "status", "close"]
    session: str | None = Omitted(description="The handle: pass it as `session` to the tools that use working memory.")
    session_id: str  # the working-memory session it stands for
    expires_at: str | None = Omitted(description="When it expires unless used again (ISO 8601).")
    idle_minutes: int | None = Omitted(description="Each use keeps it open this long.")
    expunged: int | None = Omitted(description="close: working-memory items removed.")


def digest(handle: str) -> str:
    """What the store keeps of a handle."""
    return hashlib.sha256(handle.encode()).hexdigest()


def principal_of(ctx: CallContext) -> str:
    """The credential a call is made with, as handles record it."""
    if not ctx.principal:
        raise InvalidArgument("this face names no credential; sessions are opened over MCP")
    return ctx.principal


class SessionHandles:
    """Open, use, close and expire handles; `memory` is the engine's MemoryService."""

    def __init__(self, memory: MemoryService) -> None:
        self.memory = memory

    @property
    def store(self) -> SessionHandleStore:
        return cast("SessionHandleStore", self.memory.store)  # every backend is an AppStore

    def run(self, inp: SessionInput, ctx: CallContext) -> SessionResult:
        """The `session` tool."""
        if inp.action == "open":
            if inp.session is not None:
                raise InvalidArgument("session: open mints a new handle; leave session out (nothing opened)")
            return self.open(ctx, inp.idleMinutes)
        if inp.idleMinutes is not None:
            raise InvalidArgument(f"idleMinutes: only open takes it; nothing {'closed' if inp.action == 'close' else 'changed'}")
        if not inp.session:
            raise InvalidArgument(f"session: {inp.action} needs the handle open returned")
        if inp.action == "close":
            return self.close(inp.session, ctx)
        return _view("status", self.use(inp.session, ctx))

    def open(self, ctx: CallContext, idle_minutes: int | None = None) -> SessionResult:
        """Mint a handle for a fresh working-memory session of the caller's namespace."""
        if ctx.read_only:
            raise Forbidden("a read-only credential cannot open a session (it could keep nothing in it)")
        who = principal_of(ctx)
        try:
            self.sweep()  # the expired ones end first: their rows and working memory go
        except MementoError:  # a sweep that cannot finish now must not refuse the open; the lifecycle retries
            log.warning("ending expired session handles failed; they stay for the next sweep", exc_info=True)
        now = self.memory.clock()
        idle = 60 * (idle_minutes or self.memory.settings.session_ttl_minutes)
        handle = secrets.token_urlsafe(HANDLE_BYTES)
        scope = call_scope(None, ctx)
        row = SessionHandle(
            digest=digest(handle),
            agent_id=scope.agent_id,
            principal=who,
            session_id=SESSION_PREFIX + secrets.token_urlsafe(18),
            idle_seconds=idle,
            created_at=now,
            used_at=now,
            expires_at=now + timedelta(seconds=idle),
        )
        stored = self.store.add_handle(scope, row, now, MAX_OPEN)
        log.info("session handle opened for session %s (idle %ss)", stored.session_id, idle)
        return _view("open", stored).model_copy(update={"session": handle})

    def use(self, handle: str, ctx: CallContext) -> SessionHandle:
        """The caller's live handle (its use recorded); NotFound for an unknown, expired or
        foreign one alike. An expired one of the caller's is ended on the spot."""
        who = principal_of(ctx)
        scope = call_scope(None, ctx)
        now = self.memory.clock()
        found = self.store.use_handle(scope, digest(handle), who, now)
        if found is not None:
            return found
        with self.memory.store.atomic():
            expired = self.store.drop_handle(scope, digest(handle), who, expired_by=now)
            if expired is not None:
                self._end(expired)
        raise NotFound(UNKNOWN)

    def bind(self, handle: str, ctx: CallContext) -> CallContext:
        """`ctx` working in the session `handle` stands for (raises as `use`)."""
        found = self.use(handle, ctx)
        return replace(ctx, session_id=found.session_id, memory_session_id=None)

    def close(self, handle: str, ctx: CallContext) -> SessionResult:
        """End the session: the handle goes and its working memory with it (summarized first
        when MEMENTO_SUMMARIZE_ON_SESSION_END), in one transaction."""
        who = principal_of(ctx)
        with self.memory.store.atomic():
            found = self.store.drop_handle(call_scope(None, ctx), digest(handle), who)
            if found is None:
                raise NotFound(UNKNOWN)
            expunged = self._end(found)
        return SessionResult(action="close", session_id=found.session_id, expunged=expunged)

    def sweep(self, now: datetime | None = None) -> int:
        """End every expired handle's session (the lifecycle's `working_memory_expired` stage,
        and each `open`); how many were ended."""
        now = now or self.memory.clock()
        ended = 0
        for found in self.store.expired_handles(now, SWEEP_BATCH):
            with self.memory.store.atomic():
                dropped = self.store.drop_handle(AgentScope(found.agent_id), found.digest, found.principal, expired_by=now)
                if dropped is None:  # another replica ended it first
                    continue
                self._end(dropped)
            ended += 1
        if ended:
            log.info("%d expired session handles ended", ended)
        return ended

    def _end(self, found: SessionHandle) -> int:
        """The session's working memory ends as a closed MCP session's does."""
        if self.memory.settings.memory_session_persist:  # MEMORY_MCP_SESSION_PERSIST: kept for debugging
            return 0
        return self.memory.end_session(found.session_id, CallContext(agent_id=found.agent_id))


UNKNOWN = "unknown or expired session handle: open a new one (the session tool, action open)"


def _view(action: Literal["open", "status", "close"], found: SessionHandle) -> SessionResult:
    return SessionResult(
        action=action, session_id=found.session_id, expires_at=found.expires_at.isoformat(), idle_minutes=found.idle_seconds // 60
    )
