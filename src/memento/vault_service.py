"""VaultService: seed 002's keyed memory in two scopes over the one engine.

A keyed memory is a fragment with a `memory_key`: stored through MemoryService's write path
(redaction, analysis, the server's embedding), recalled by 000's `recall`, counted in stats and
isolated per agent like any other. The vault scope is permanent memory (session_id NULL); the
session scope is working memory of the 002 session (CallContext.memory_session). A commit on an
existing key updates that memory in place, its previous state archived in the version trail.
Keyed memories are the caller's own: the shared pool's are not listed, searched or pruned here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Literal

import numpy as np

from .access import refuse_foreign_session
from .errors import InvalidArgument, InvalidParams, NotFound, SessionRequired
from .factory import content_hash
from .models import AgentScope, CallContext, ChangeEvent, Fragment, FragmentType, RecordFields, Scope
from .storage.protocol import FragmentChanges, SearchFilter
from .vault_models import (
    CommitMemoryInput,
    CommitResult,
    KeyedMemory,
    PruneMemoryInput,
    PruneResult,
    SearchHit,
    SearchMemoriesInput,
    SearchResult,
    zulu,
)
from .vault_query import Document, bm25, min_max, parse

if TYPE_CHECKING:
    from .service import MemoryService

MAX_SCAN = 20_000  # keyed memories one search ranks (the newest); also the most one prune removes
MAX_LISTING = 10_000  # offset + limit of memory://vault
BM25_WEIGHT = 0.4  # 002 §3.2: relevance = 0.4·bm25 + 0.6·cosine where both are known
BULK_REFUSAL = "Bulk vault prune requires at least one filter."
SOURCE = "commit_memory"
Kinds = Literal["session", "vault", "all"]


@dataclass(frozen=True)
class _Where:
    """Which keyed rows a call addresses: the caller's own, in the vault and/or one session."""

    scope: AgentScope
    session: str | None
    vault: bool
    in_session: bool

    def filter(self, *, key: str | None = None, tags: tuple[str, ...] = (), before: datetime | None = None) -> SearchFilter:
        base = SearchFilter(keyed=True, owner=self.scope.agent_id, memory_key=key, tags_all=tags, created_before=before)
        if self.in_session:  # the session's rows, and the vault's too unless only the session is asked
            return replace(base, session_id=self.session, only_session=not self.vault)
        return base


def scope_of(f: Fragment) -> str:
    return "vault" if f.session_id is None else "session"


def vector_bytes(values: list[float] | None) -> bytes | None:
    """An agent's vector as stored (float32 little-endian); refused when not finite."""
    if values is None:
        return None
    vec = np.asarray(values, dtype="<f4")
    if not np.all(np.isfinite(vec)):
        raise InvalidArgument("embedding: every value must be a finite number (float32)")
    return vec.tobytes()


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity clamped to [0, 1] (0 for a zero vector)."""
    den = float(np.linalg.norm(a) * np.linalg.norm(b))
    return 0.0 if den == 0.0 else max(0.0, min(1.0, float(a @ b) / den))


class VaultService:
    """The operations of the vault face; `memory` is the engine's MemoryService."""

    def __init__(self, memory: MemoryService) -> None:
        self.memory = memory

    # ------------------------------------------------------------ helpers

    def _where(self, scope: AgentScope, kinds: Kinds, ctx: CallContext, *, need_session: bool) -> _Where:
        session = ctx.memory_session
        in_session = kinds in ("session", "all") and session is not None
        if kinds == "session" and session is None and need_session:
            raise SessionRequired("scope 'session' needs a session (none was given at initialize and the transport has none)")
        if in_session:
            refuse_foreign_session(self.memory.store, scope, session, ctx)
        return _Where(scope, session, kinds in ("vault", "all"), in_session)

    def _rows(self, where: _Where, limit: int, **filters: object) -> list[Fragment]:
        if not (where.vault or where.in_session):
            return []
        return self.memory.store.recent(where.scope, where.filter(**filters), limit)  # type: ignore[arg-type]

    def _updated_at(self, scope: AgentScope, f: Fragment) -> datetime:
        """The time of the latest version (an upsert archives one), else the creation time."""
        times = [v.get("amended_at") for v in self.memory.store.versions(scope, f.id)]
        latest = [t if isinstance(t, datetime) else datetime.fromisoformat(str(t)) for t in times if t]
        return max([f.created_at, *latest])

    def keyed(self, scope: AgentScope, f: Fragment) -> KeyedMemory:
        """002 §3.1: the memory as its resources show it (the full text, not the 300-character cut)."""
        return KeyedMemory(
            key=f.memory_key or "",
            content=f.detail or f.content,
            tags=list(f.tags),
            scope=scope_of(f),
            created_at=zulu(f.created_at),
            updated_at=zulu(self._updated_at(scope, f)),
        )

    # ------------------------------------------------------------ tools

    def commit(self, inp: CommitMemoryInput, ctx: CallContext) -> CommitResult:
        """002 §3.2 commit_memory: insert, or update the key's memory in place (upsert)."""
        scope = self.memory._writable(None, ctx)
        where = self._where(scope, inp.scope, ctx, need_session=True)
        factory = self.memory.factory
        tags = factory.clean_tags(inp.tags or ())
        client = vector_bytes(inp.embedding)
        full = factory.clean_detail(inp.content) or factory.clean_content(inp.content)
        keywords = factory.keywords_for(full, [*factory.keywords_for(full, None), inp.key, _spaced(inp.key)])
        new = self.memory._prepare(
            scope,
            ctx,
            content=inp.content,
            topic=inp.scope,
            type_=FragmentType.FACT,
            keywords=keywords,
            source=SOURCE,
            scope_kind=Scope.SESSION if inp.scope == "session" else Scope.PERMANENT,
            session_id=where.session if inp.scope == "session" else None,
            record=RecordFields(tags=tags, memory_key=inp.key, client_embedding=client),
        )
        d = new.draft
        store = self.memory.store
        queued: dict[str, object] = {}
        with store.atomic():
            fragment, created = store.insert(scope, new)
            queued = (self.memory.queued_with(fragment) or {}) if created else {}
            changed = not created and (
                (fragment.content, fragment.detail, tuple(fragment.tags), fragment.client_embedding)
                != (d.content, d.record.detail, tuple(d.record.tags), client)
            )
            if changed:
                changes = FragmentChanges(
                    content=d.content,
                    content_hash=content_hash(d.record.detail or d.content),
                    estimated_tokens=d.estimated_tokens,
                    keywords=list(d.keywords),
                    embedding=new.embedding,
                    clear_embedding=new.embedding is None,
                    tags=tuple(d.record.tags),
                    detail=d.record.detail,
                    client_embedding=client,
                    clear_client_embedding=client is None,
                )
                fragment = store.update(scope, fragment.id, changes, scope.agent_id, self.memory.clock())
        if created or changed:
            kind = "created" if created else "amended"
            details = {"memory_key": inp.key, "scope": inp.scope, **queued}
            self.memory._emit(ChangeEvent(kind, fragment.agent_id, (fragment.id,), (fragment.topic,), fragment.session_id, details=details))
        return CommitResult(committed=True, key=inp.key, scope=inp.scope)

    def search(self, inp: SearchMemoriesInput, ctx: CallContext) -> SearchResult:
        """002 §3.2 search_memories: the query's matches ranked by BM25 (min-max normalised),
        blended 0.4·bm25 + 0.6·cosine with the agents' own vectors when a query_embedding is given."""
        query = parse(inp.query)
        scope = self.memory._scope(None, ctx)
        where = self._where(scope, inp.scope or "all", ctx, need_session=True)
        tags = self.memory.factory.clean_tags(inp.tags or ())
        rows = self._rows(where, MAX_SCAN, tags=tags)
        docs = [Document.of(f.memory_key or "", f.detail or f.content, f.tags) for f in rows]
        scores = bm25(query, docs)
        matched = [(f, s) for f, s in zip(rows, scores) if s is not None]
        norms = min_max([s for _, s in matched])
        target = None if inp.query_embedding is None else np.asarray(inp.query_embedding, dtype=np.float32)
        ranked: list[tuple[float, Fragment]] = []
        for (f, _), norm in zip(matched, norms):
            relevance = norm
            if target is not None and f.client_embedding is not None:
                vec = np.frombuffer(f.client_embedding, dtype="<f4")
                if vec.shape == target.shape:
                    relevance = BM25_WEIGHT * norm + (1 - BM25_WEIGHT) * cosine(vec, target)
            ranked.append((relevance, f))
        ranked.sort(key=lambda pair: (-pair[0], -pair[1].created_at.timestamp(), pair[1].memory_key or ""))
        top = ranked[: inp.limit]
        if top:
            self.memory.store.record_access([f.id for _, f in top], self.memory.clock())
        hits = [
            SearchHit(key=f.memory_key or "", content=f.detail or f.content, tags=list(f.tags), scope=scope_of(f), relevance=round(r, 4))
            for r, f in top
        ]
        return SearchResult(results=hits, total_searched=len(matched))

    def prune(self, inp: PruneMemoryInput, ctx: CallContext) -> PruneResult:
        """002 §3.2 prune_memory: by key, age and tags (all must hold); the vault only with a filter."""
        cutoff = inp.cutoff()
        if inp.scope != "session" and inp.key is None and cutoff is None and not inp.tags:
            raise InvalidParams(BULK_REFUSAL)
        scope = self.memory._writable(None, ctx)
        where = self._where(scope, inp.scope, ctx, need_session=True)
        tags = self.memory.factory.clean_tags(inp.tags or ())
        rows = self._rows(where, MAX_SCAN, key=inp.key, tags=tags, before=cutoff)
        if not rows:
            return PruneResult(pruned_count=0)
        gone = self.memory.store.delete(scope, [f.id for f in rows])
        if gone:
            keys = sorted({f.memory_key or "" for f in rows if f.id in set(gone)})
            sessions = {f.session_id for f in rows}
            for session in sessions:
                ids = tuple(f.id for f in rows if f.session_id == session and f.id in gone)
                topics = tuple({f.topic for f in rows if f.session_id == session})
                self.memory._emit(ChangeEvent("deleted", scope.agent_id, ids, topics, session, details={"memory_keys": keys}))
        return PruneResult(pruned_count=len(gone))

    # ------------------------------------------------------------ resources (002 §3.1)

    def get(self, key: str, ctx: CallContext) -> KeyedMemory:
        """memory://vault/{key}."""
        scope = self.memory._scope(None, ctx)
        where = self._where(scope, "vault", ctx, need_session=False)
        found = self._rows(where, 1, key=key)
        if not found:
            raise NotFound(f"no vault memory with key {key!r}")
        return self.keyed(scope, found[0])

    def vault(self, offset: int, limit: int, ctx: CallContext) -> list[KeyedMemory]:
        """memory://vault?offset=&limit=: the vault by key."""
        if offset < 0 or limit < 1 or offset + limit > MAX_LISTING:
            raise InvalidArgument(f"offset >= 0, limit >= 1 and offset + limit <= {MAX_LISTING}")
        scope = self.memory._scope(None, ctx)
        rows = sorted(self._rows(self._where(scope, "vault", ctx, need_session=False), MAX_LISTING), key=lambda f: f.memory_key or "")
        return [self.keyed(scope, f) for f in rows[offset : offset + limit]]

    def session(self, session_id: str, ctx: CallContext) -> list[KeyedMemory]:
        """memory://session/{session_id}: the caller's keyed memories of that session, by key."""
        scope = self.memory._scope(None, ctx)
        refuse_foreign_session(self.memory.store, scope, session_id, ctx)
        where = _Where(scope, session_id, vault=False, in_session=True)
        rows = sorted(self._rows(where, MAX_LISTING), key=lambda f: f.memory_key or "")
        return [self.keyed(scope, f) for f in rows]


def _spaced(key: str) -> str:
    """The key's words (`user_preference_language` → `user preference language`) for the index."""
    return " ".join("".join(c if c.isalnum() else " " for c in key).split()) or key
