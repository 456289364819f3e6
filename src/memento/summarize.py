"""Working memory's end (004 §3 wm_buffer, §5.1 summarize_thread): a session's working memory
becomes one episodic memory instead of only being deleted.

Four ways in, one way of storing:
- `summarize_thread` (the tool, POST /api/sessions/{id}/summarize): the caller's own session, the
  operator's or the client's model when there is one (lifecycle/summary.py `drafted`), else the
  deterministic summary; the items stay unless `keep` is false.
- `end` (MemoryService.end_session: the stdio and HTTP session close paths): summary, then the
  session's rows are expunged, in one transaction.
- `expire_idle` (the consolidation's `workingMemoryExpired` stage): `end` for every idle session.
- `fold_overflow` (remember, right after a working-memory write): past MEMENTO_WORKING_MEMORY_TOKEN_BUDGET
  the oldest items are folded into a summary and removed until half the budget is left.

Every item goes into one summary only: a summary records the ids it covers in its origin trace
and carries the source `summarize_thread:<session>`, and a later summary of the session covers
only the items no earlier one did. The automatic paths never ask a model (docs/lifecycle.md
"Working memory's end").
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from .errors import Conflict, InvalidArgument, SessionRequired, Unavailable
from .factory import new_fragment_id
from .lifecycle.summary import EmptyAnswer, drafted, extractive
from .models import (
    AgentScope,
    CallContext,
    ChangeEvent,
    Complete,
    Fragment,
    FragmentType,
    MemorySystem,
    PrivacyScope,
    RecordFields,
    SummarizeThreadInput,
)
from .results import SummarizeThreadResult
from .storage.protocol import NewFragment, SearchFilter

if TYPE_CHECKING:
    from .service import MemoryService

log = logging.getLogger(__name__)

SOURCE = "summarize_thread"
TAG = "session-summary"
MAX_ITEMS = 5000  # the items one summary reads (the token budget keeps a session far below)
MAX_SUMMARIES = 1000  # the earlier summaries of a session consulted
SYSTEM = AgentScope("system")
Method = Literal["extractive", "llm", "sampling"]


@dataclass(frozen=True)
class Ended:
    """What ending one session did: rows removed, and the summary left (None: none was needed)."""

    removed: int
    summary_id: str | None = None


def source_of(session_id: str) -> str:
    """The source of a session's summaries (how later summaries of the session find them)."""
    return f"{SOURCE}:{session_id}"


class ThreadSummarizer:
    """Summaries of working memory over the service's write path (`service.threads`)."""

    def __init__(self, service: MemoryService) -> None:
        self.service = service

    # ------------------------------------------------------------ the tool

    def summarize_thread(self, inp: SummarizeThreadInput, ctx: CallContext) -> SummarizeThreadResult:
        """The caller's session's working memory → one episodic memory (its id in the result)."""
        service = self.service
        scope = service._writable(inp.agentId, ctx, pool=True)
        session = inp.sessionId or ctx.session_id
        if not session:
            raise SessionRequired("summarize_thread needs a sessionId (none was given and the transport has no session); nothing stored")
        service._own_session(scope, session, ctx)
        items = self.items(scope.agent_id, session)
        if not items:
            raise InvalidArgument(f"session {session!r} has no working memory to summarize; nothing stored")
        done = self.summarized(scope.agent_id, session)
        fresh = [item for item in items if item.id not in done]
        if not fresh:
            raise InvalidArgument(
                f"the {len(items)} working-memory item(s) of session {session!r} are all in an earlier summary; nothing stored"
            )
        text, method, fallback = self.draft(fresh, inp.title, service.protocol.language_model(ctx))
        ids = [item.id for item in items]
        clear = None if inp.keep else (lambda: len(service.store.delete(SYSTEM, ids)))
        fragment, removed = self._store(scope, session, fresh, text, method, clear)
        if fragment is None:
            raise Conflict(f"session {session!r} ended while it was being summarized; nothing stored")
        if removed:
            self._removed(scope.agent_id, session, ids)
        return SummarizeThreadResult(
            id=fragment.id,
            session_id=session,
            item_count=len(fresh),
            removed=removed,
            method=method,
            fallback=fallback,
            summary=fragment.detail or fragment.content,
        )

    def draft(self, items: Sequence[Fragment], title: str | None, model: Complete | None) -> tuple[str, Method, str | None]:
        """The summary text, how it was written, and why a model's answer was not used."""
        count, cap = self.service.factory.tokens.count, self.service.settings.summary_max_tokens
        if model is None:
            return extractive(items, count, cap, title), "extractive", None
        method: Method = "llm" if self.service.protocol.llm is not None else "sampling"
        try:
            return drafted(model, items, count, cap, title), method, None
        except Unavailable as exc:
            reason = exc.message
        except EmptyAnswer as exc:
            reason = str(exc)
        log.info("summarize_thread: the %s answer was not used; extractive summary instead", method)
        return extractive(items, count, cap, title), "extractive", f"{method}: {reason}"

    # ------------------------------------------------------------ the automatic paths

    def end(self, session_id: str, owner: str, *, quiet: bool = False, embed: bool = True) -> Ended:
        """A session ended: its working memory (not yet in a summary) becomes one, and the
        session's rows are expunged with it in one transaction (only expunged when the setting is off).
        `quiet` (a consolidation's dry run): no change event; `embed` False: the summary waits for the
        backfill (the consolidation's, which embeds it in the same run)."""
        store = self.service.store
        if not self.service.settings.summarize_on_session_end:
            return Ended(store.expunge_session(session_id, owner))
        items = self.items(owner, session_id)
        done = self.summarized(owner, session_id) if items else set()
        fresh = [item for item in items if item.id not in done]
        if not fresh:
            return Ended(store.expunge_session(session_id, owner))
        count, cap = self.service.factory.tokens.count, self.service.settings.summary_max_tokens
        text = extractive(fresh, count, cap)
        fragment, removed = self._store(
            AgentScope(owner),
            session_id,
            fresh,
            text,
            "extractive",
            lambda: store.expunge_session(session_id, owner),
            quiet=quiet,
            embed=embed,
        )
        return Ended(removed, fragment.id if fragment is not None else None)

    def expire_idle(self, idle_before: datetime, *, quiet: bool = False) -> tuple[list[str], int]:
        """The consolidation's `workingMemoryExpired`: every session idle since `idle_before` ends
        (`end`); (the ids of the rows removed, summaries left). `quiet`: a dry run's rehearsal."""
        maintenance = self.service.consolidator.maintenance
        if not self.service.settings.summarize_on_session_end:
            return maintenance.expire_sessions(idle_before), 0
        removed: list[str] = []
        summaries = 0
        for owner, session_id in maintenance.idle_sessions(idle_before):
            rows = [item.id for item in self.items(owner, session_id)]
            ended = self.end(session_id, owner, quiet=quiet, embed=False)
            removed += rows if ended.removed else []
            summaries += ended.summary_id is not None
            if ended.removed and not quiet:
                self.service._emit(ChangeEvent("session_ended", owner, session_id=session_id))
        return removed, summaries

    def fold_overflow(self, owner: str, session_id: str) -> tuple[int, str | None]:
        """Past the session's token budget, fold its oldest items (keyed ones apart) into a summary
        and remove them until half the budget is left; the newest item always stays. One cheap
        aggregate when within budget. (items removed, the summary's id)."""
        budget = self.service.settings.working_memory_token_budget
        store = self.service.store
        if budget <= 0 or store.session_tokens(owner, session_id) <= budget:
            return 0, None
        items = [item for item in self.items(owner, session_id) if item.memory_key is None]
        left = sum(item.estimated_tokens for item in items)
        fold: list[Fragment] = []
        for item in items[:-1]:
            if left <= budget // 2:
                break
            fold.append(item)
            left -= item.estimated_tokens
        if not fold:
            return 0, None
        done = self.summarized(owner, session_id)
        fresh = [item for item in fold if item.id not in done]
        ids = [item.id for item in fold]
        clear: Callable[[], int] = lambda: len(store.delete(SYSTEM, ids))  # noqa: E731
        if not fresh:  # all already summarized (summarize_thread with keep): only removed
            removed = clear()
            self._removed(owner, session_id, ids if removed else [])
            return removed, None
        text = extractive(fresh, self.service.factory.tokens.count, self.service.settings.summary_max_tokens)
        fragment, removed = self._store(AgentScope(owner), session_id, fresh, text, "extractive", clear)
        if removed:
            self._removed(owner, session_id, ids)
        return removed, fragment.id if fragment is not None else None

    # ------------------------------------------------------------ reading and storing

    def items(self, owner: str, session_id: str) -> list[Fragment]:
        """The working memory `owner` keeps under `session_id`, oldest first (never another
        namespace's rows with the same session id)."""
        filt = SearchFilter(session_id=session_id, only_session=True, owner=owner)
        found = self.service.store.list_fragments(AgentScope(owner), filt, MAX_ITEMS)
        return sorted(found, key=lambda f: (f.created_at, f.seq))

    def summarized(self, owner: str, session_id: str) -> set[str]:
        """The ids of the session's items an earlier summary covers (from the summaries' origin traces)."""
        filt = SearchFilter(owner=owner, source=source_of(session_id))
        found = self.service.store.list_fragments(AgentScope(owner), filt, MAX_SUMMARIES)
        ids = (item for f in found for item in (f.origin_trace or {}).get("itemIds", []))
        return {item for item in ids if isinstance(item, str)}

    def _store(
        self,
        scope: AgentScope,
        session_id: str,
        items: Sequence[Fragment],
        text: str,
        method: Method,
        clear: Callable[[], int] | None,
        *,
        quiet: bool = False,
        embed: bool = True,
    ) -> tuple[Fragment | None, int]:
        """Insert the summary and `clear` the items in one transaction. When `clear` finds nothing
        left (the session ended meanwhile) nothing is stored: (None, 0). The summary's id follows
        from the items it covers (a dry run reports the id the real run then makes). `quiet`: no
        change event; `embed` False: no vector yet (the backfill gives it one)."""
        service = self.service
        trace = {
            "sessionId": session_id,
            "itemCount": len(items),
            "itemIds": [item.id for item in items],
            "method": method,
            "from": items[0].created_at.isoformat(),
            "to": items[-1].created_at.isoformat(),
        }
        record = RecordFields(tags=(TAG,), memory_system=MemorySystem.EPISODIC, privacy_scope=PrivacyScope.PRIVATE, origin_trace=trace)
        topic = Counter(item.topic for item in items).most_common(1)[0][0]
        new = service._prepare(  # redacted, analysed and embedded outside the transaction
            scope,
            CallContext(),
            content=text,
            topic=topic,
            type_=FragmentType.EPISODE,
            source=source_of(session_id),
            record=record,
            embed=embed,
        )
        key = "\n".join([scope.agent_id, session_id, *sorted(item.id for item in items)])
        new = replace(new, draft=replace(new.draft, id="frag-" + hashlib.sha256(key.encode()).hexdigest()[:16]))

        def insert(new: NewFragment) -> tuple[Fragment | None, int, bool]:
            with service.store.atomic():
                if clear is not None and _amended_since(service, scope, items):
                    return None, 0, False  # summarised from text since changed: the next fold or sweep reads it again
                removed = clear() if clear is not None else 0
                if clear is not None and not removed:
                    return None, 0, False
                fragment, created = service.store.insert(scope, new)
                return fragment, removed, created

        try:
            fragment, removed, created = insert(new)
        except Conflict:  # the id is taken (the same items summarized before, since forgotten): a fresh one
            fragment, removed, created = insert(replace(new, draft=replace(new.draft, id=new_fragment_id())))
        if fragment is None:
            return None, 0
        if created and not quiet:
            service._emit(ChangeEvent("created", fragment.agent_id, (fragment.id,), (fragment.topic,)))
        return fragment, removed

    def _removed(self, owner: str, session_id: str, ids: Sequence[str]) -> None:
        if ids:
            self.service._emit(ChangeEvent("deleted", owner, tuple(ids), session_id=session_id))


def _amended_since(service: MemoryService, scope: AgentScope, items: Sequence[Fragment]) -> bool:
    """Whether an item that a summary is about to replace was amended since it was read (inside
    the transaction that would remove it)."""
    now = {f.id: (f.content, f.detail) for f in service.store.get_many(scope, [item.id for item in items])}
    return any(now.get(item.id, (item.content, item.detail)) != (item.content, item.detail) for item in items)
