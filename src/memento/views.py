"""Read-only views of the memory for the MCP resources, prompts and argument completion.

Views record no access (a view is not a recall) and flush the buffered access statistics first:
what they show then never depends on whether a batched flush happened to land between two reads.
"""

from __future__ import annotations

from collections.abc import Callable

from .access import pool_writes
from .errors import InvalidArgument, NotFound
from .models import AgentScope, CallContext, ForgetInput, TTLTier
from .results import ForgetPreview, FragmentView, TopicCount, views
from .settings import Settings
from .storage.protocol import SearchFilter, Store


class MemoryViews:
    """The views, over the service's store and its scope rules."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        scope: Callable[[str | None, CallContext], AgentScope],
        own_session: Callable[[AgentScope, str | None, CallContext], None],
    ) -> None:
        self.store = store
        self.settings = settings
        self.scope = scope
        self.own_session = own_session

    def get_fragment(self, fragment_id: str, ctx: CallContext) -> FragmentView:
        """One visible fragment as JSON; records no access (a view, not a recall)."""
        self.store.flush_access()
        found = self.store.get_many(self.scope(None, ctx), [fragment_id])
        if not found:
            raise NotFound(f"fragment {fragment_id!r} not found", missing=(fragment_id,))
        return FragmentView.of(found[0])

    def list_topics(self, ctx: CallContext, prefix: str = "", limit: int = 1000) -> list[TopicCount]:
        """Topics of permanent fragments (optionally by prefix) with their counts, by name."""
        return [TopicCount(topic=t, count=n) for t, n in self.store.topics(self.scope(None, ctx), prefix, limit)]

    def topic_fragments(self, topic: str, ctx: CallContext, limit: int = 200) -> list[FragmentView]:
        """Permanent fragments of one topic, newest first."""
        self.store.flush_access()
        rows = self.store.page(self.scope(None, ctx), SearchFilter(topic=topic), None, limit)
        return views(rows)

    def list_fragments_page(self, ctx: CallContext, before_seq: int | None, limit: int) -> tuple[list[FragmentView], int | None]:
        """Permanent fragments newest first; returns the page and the keyset of the next page."""
        self.store.flush_access()
        rows = self.store.page(self.scope(None, ctx), SearchFilter(), before_seq, limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        return views(rows), (rows[-1].seq if more and rows else None)

    def working_memory(self, session_id: str, ctx: CallContext, limit: int = 200) -> list[FragmentView]:
        """A session's working memory (scope=session fragments), newest first."""
        scope = self.scope(None, ctx)
        self.own_session(scope, session_id, ctx)
        self.store.flush_access()
        filt = SearchFilter(session_id=session_id, only_session=True)
        return views(self.store.page(scope, filt, None, limit))

    def fragment_ids(self, ctx: CallContext, prefix: str, limit: int = 100) -> list[str]:
        """Visible fragment ids starting with `prefix` (for argument completion)."""
        return self.store.ids_with_prefix(self.scope(None, ctx), prefix, limit)

    def preview_forget(self, inp: ForgetInput, ctx: CallContext) -> ForgetPreview:
        """What `forget` would delete, without deleting: target ids and the protected ones
        (pool fragments the caller may not change are never targets)."""
        scope = AgentScope(self.scope(inp.agentId, ctx).agent_id, pool_writes(ctx, self.settings.shared_pool))
        if (inp.id is None) == (inp.topic is None):
            raise InvalidArgument("give exactly one of 'id' or 'topic'")
        found = self.store.get_many(scope, [inp.id]) if inp.id is not None else self.store.find_by_topic(scope, inp.topic or "")
        targets = [f for f in found if scope.may_change(f)]
        protected = [f.id for f in targets if f.ttl_tier is TTLTier.PERMANENT or f.is_anchor]
        return ForgetPreview(ids=[f.id for f in targets], protected=protected)
