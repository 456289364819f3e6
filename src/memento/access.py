"""Who may read and change what: the namespace of a call, the shared pool's write rule
(MEMENTO_SHARED_POOL) and session ownership. The service asks here before every operation;
the stores check the same rules again in their statements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from .errors import Forbidden
from .models import DEFAULT_AGENT, AgentScope, CallContext, Fragment, PoolWrites, session_refusal
from .storage.protocol import Store

OWN_NAMESPACE_ONLY = "this operation writes only your own namespace, not the shared 'default' pool; nothing changed"


def call_scope(agent_id: str | None, ctx: CallContext) -> AgentScope:
    """The namespace of a call: an agentId argument may narrow a credential (to its own
    namespace or the shared pool it already sees), never widen it."""
    widening = bool(ctx.agent_id and agent_id and agent_id not in (ctx.agent_id, DEFAULT_AGENT))
    if widening and not AgentScope(str(ctx.agent_id)).is_maintenance:
        raise Forbidden(f"this credential may not act as agent {agent_id!r}")
    return AgentScope(agent_id or ctx.agent_id or DEFAULT_AGENT)


def pool_writes(ctx: CallContext, rule: Literal["read", "write"]) -> PoolWrites:
    """What the caller may change in the shared pool: admin principals everything, agent
    credentials nothing (`read`) or its non-anchored fragments (`write`)."""
    if ctx.agent_id is None or AgentScope(ctx.agent_id).is_maintenance:
        return PoolWrites.ALL
    if ctx.read_only or rule == "read":
        return PoolWrites.NONE
    return PoolWrites.UNANCHORED


def writable_scope(agent_id: str | None, ctx: CallContext, rule: Literal["read", "write"], *, pool: bool) -> AgentScope:
    """The scope of a call that changes memory. Refused: a read-only credential, and an agent
    credential writing into the shared pool unless `pool` (the operation may add to it) and
    the rule allow it."""
    if ctx.read_only:
        raise Forbidden("this credential is read-only")
    scope = AgentScope(call_scope(agent_id, ctx).agent_id, pool_writes(ctx, rule))
    if scope.agent_id == DEFAULT_AGENT and scope.pool_writes is not PoolWrites.ALL:
        if scope.pool_writes is PoolWrites.NONE:
            raise Forbidden(scope.pool_refusal([]))
        if not pool and ctx.agent_id != DEFAULT_AGENT:  # a key bound to `default` writes its own
            raise Forbidden(OWN_NAMESPACE_ONLY)
    return scope


def refuse_unchangeable(scope: AgentScope, fragments: Sequence[Fragment]) -> None:
    """Refuse, changing nothing, when some of `fragments` are pool rows `scope` may not change."""
    refused = [f.id for f in fragments if not scope.may_change(f)]
    if refused:
        raise Forbidden(scope.pool_refusal(refused))


def refuse_foreign_session(store: Store, scope: AgentScope, session_id: str | None, ctx: CallContext) -> None:
    """Refuse a session id whose working memory belongs to another namespace. The caller's own
    MCP session is its own from the start, whoever named it first; maintenance sees all."""
    if session_id is None or session_id == ctx.session_id or scope.is_maintenance:
        return
    if any(owner != scope.agent_id for owner in store.session_owners(session_id)):
        raise Forbidden(session_refusal(session_id))
