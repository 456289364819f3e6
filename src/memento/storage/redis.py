"""The L1 keyword index of 000 §4.1 in Redis, with the degradation of 000 §9.1.

Keys: `memento:kw:{agent}:{keyword}` is the set of ids of `agent`'s fragments annotated with
`keyword`; `memento:fk:{id}` is the set of L1 keys that hold `id` (so amend and forget can
remove a fragment without knowing its old keywords or owner). `memento:kw-built` marks an
index that has been filled from the database.

The index follows the service's ChangeEvents (created / amended: read the fragment back from
the store and re-index it; deleted: remove; consolidated / session_ended: prune ids that are
no longer in the store). Any Redis error marks Redis down (logged once per outage); while down
every call is skipped without touching the network, and Redis is tried again after
`retry_after_s`. On recovery, and at start-up when the marker is missing, the index is rebuilt
from the store in a background thread; `lookup` answers None until the rebuild is done, so a
half-built index never stands in for the database's keyword tier.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypeVar

from ..models import AgentScope, ChangeEvent, Fragment
from ..settings import Settings

log = logging.getLogger(__name__)

PREFIX = "memento:kw:"
REVERSE = "memento:fk:"
BUILT = "memento:kw-built"
SYSTEM = AgentScope("system")  # existence checks see every agent
T = TypeVar("T")


class FragmentSource(Protocol):
    """What the index reads from the store (both backends provide it)."""

    def get_many(self, scope: AgentScope, ids: Sequence[str]) -> list[Fragment]: ...
    def export_rows(self, table: str, after: int, limit: int) -> list[dict[str, object]]: ...


def key(agent: str, keyword: str) -> str:
    return f"{PREFIX}{agent}:{keyword}"


def connect(settings: Settings, *, timeout_s: float = 2.0, connect_timeout_s: float = 1.0) -> Any:
    """A redis-py client from the REDIS_* settings (through Sentinel when enabled). Lazy: no I/O.

    Callers on the event loop pass shorter timeouts: a call there stalls every request."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    options: dict[str, Any] = {
        "db": settings.redis_db,
        "password": settings.redis_password or None,
        "decode_responses": True,
        "socket_timeout": timeout_s,
        "socket_connect_timeout": connect_timeout_s,
        "retry": Retry(NoBackoff(), 0),
    }
    if settings.redis_sentinel_enabled:
        from redis.sentinel import Sentinel

        sentinel = Sentinel(settings.sentinel_nodes, socket_timeout=1.0, socket_connect_timeout=1.0)  # type: ignore[no-untyped-call]
        return sentinel.master_for(settings.redis_master_name, **options)  # type: ignore[no-untyped-call]
    return redis.Redis(host=settings.redis_host, port=settings.redis_port, **options)


LOOP_TIMEOUT_S = 0.5  # calls made on the event loop must answer (or fail) fast
LOOP_CONNECT_TIMEOUT_S = 0.25


@dataclass
class RedisClients:
    """The process's Redis connections, created once by the composition root and handed down.

    `blocking` serves worker threads (the L1 keyword index, the replica bus, the OAuth store);
    `loop` serves code on the event loop (MCP session directory, SSE event store, task board),
    with short timeouts so a sick Redis cannot stall every request. Lazy: no I/O until used."""

    blocking: Any
    loop: Any

    @classmethod
    def connect(cls, settings: Settings) -> RedisClients:
        return cls(blocking=connect(settings), loop=connect(settings, timeout_s=LOOP_TIMEOUT_S, connect_timeout_s=LOOP_CONNECT_TIMEOUT_S))

    def close(self) -> None:
        for client in (self.blocking, self.loop):
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing a dead connection
                pass


class RedisKeywordIndex:
    """L1: one Redis set per (agent, keyword); SINTER across the query's keywords."""

    def __init__(
        self, client: Any, store: FragmentSource, *, retry_after_s: float = 5.0, batch: int = 500, owns_client: bool = True
    ) -> None:
        self.client = client
        self.owns_client = owns_client  # False: a shared client, closed by its owner
        self.store = store
        self.retry_after_s = retry_after_s
        self.batch = batch
        self._lock = threading.Lock()
        self._down = False
        self._retry_at = 0.0
        self._ready = False
        self._rebuilding: threading.Thread | None = None
        self._closed = False

    # ------------------------------------------------------------ availability

    @property
    def available(self) -> bool:
        return not self._down

    def start(self) -> None:
        """Check Redis and rebuild the index when it has never been built (or Redis was emptied)."""
        self._call(lambda: None)
        if not self._down:
            self._after_connect(force=False)

    def _call(self, fn: Callable[[], T]) -> T | None:
        """Run one Redis operation; None when Redis is (or just went) down (so `fn` must not
        answer None itself when the caller tells success from failure)."""
        import redis

        with self._lock:
            if self._down and time.monotonic() < self._retry_at:
                return None
            recovering = self._down
        try:
            if recovering:
                self.client.ping()
            result = fn()
        except (redis.RedisError, OSError) as exc:
            with self._lock:
                if not self._down:
                    log.warning("redis unavailable, L1 keyword index skipped until it is back: %s", exc)
                self._down, self._ready = True, False
                self._retry_at = time.monotonic() + self.retry_after_s
            return None
        if recovering:
            with self._lock:
                was_down, self._down = self._down, False
            if was_down:
                log.info("redis is back; rebuilding the L1 keyword index")
                self._after_connect(force=True)
        return result

    def ping(self) -> bool:
        """True when Redis answers now (health checks; does not wait for the back-off)."""
        import redis

        try:
            self.client.ping()
        except (redis.RedisError, OSError):
            return False
        return True

    def _after_connect(self, force: bool) -> None:
        built = self._call(lambda: self.client.exists(BUILT))
        if built is None:
            return
        if built and not force:
            self._ready = True
            return
        self.rebuild_async()

    def rebuild_async(self) -> threading.Thread:
        with self._lock:
            self._ready = False
            if self._rebuilding is not None and self._rebuilding.is_alive():
                return self._rebuilding
            thread = threading.Thread(target=self._rebuild_logged, name="memento-l1-rebuild", daemon=True)
            self._rebuilding = thread
        thread.start()
        return thread

    def _rebuild_logged(self) -> None:
        try:
            self.rebuild_l1()
        except Exception:
            log.exception("L1 keyword index rebuild failed")

    def wait_ready(self, timeout_s: float = 10.0) -> bool:
        """Wait for a running rebuild (tests)."""
        thread = self._rebuilding
        if thread is not None:
            thread.join(timeout_s)
        return self._ready

    def rebuild_l1(self) -> int:
        """Index every fragment of the store (additive), prune ids the store no longer has, and
        mark the index built. Returns how many fragments were indexed; -1 when Redis failed."""
        done, after = 0, 0
        while not self._closed:
            rows = self.store.export_rows("fragments", after, self.batch)
            if not rows:
                break
            after = int(rows[-1]["seq"])  # type: ignore[call-overload]
            pairs = [(str(r["id"]), str(r["agent_id"]), list(r["keywords"] or [])) for r in rows]  # type: ignore[call-overload]
            if self._call(partial(self._index_many, pairs)) is None:
                return -1
            done += len(pairs)
        if self.prune() < 0 or self._call(lambda: self.client.set(BUILT, "1")) is None:
            return -1
        self._ready = True
        log.info("L1 keyword index rebuilt: %d fragments", done)
        return done

    # ------------------------------------------------------------ reads

    def lookup(self, scope: AgentScope, keywords: Sequence[str]) -> list[str] | None:
        """Ids whose keywords include every one of `keywords`, for each visible agent."""
        agents = scope.visible_agents()
        if agents is None or not keywords:
            return None
        if not self._ready:
            if self._down:
                self._call(lambda: None)  # probe once the back-off is over; recovery rebuilds
            return None

        def run() -> list[str]:
            pipe = self.client.pipeline(transaction=False)
            for agent in agents:
                pipe.sinter([key(agent, k) for k in dict.fromkeys(keywords)])
            found: list[str] = []
            for members in pipe.execute():
                found.extend(sorted(members))
            return found

        return self._call(run)

    # ------------------------------------------------------------ writes

    def _index_many(self, items: Iterable[tuple[str, str, list[str]]]) -> bool:
        pipe = self.client.pipeline(transaction=False)
        for fid, agent, keywords in items:
            keys = [key(agent, k) for k in dict.fromkeys(keywords) if k]
            for k in keys:
                pipe.sadd(k, fid)
            if keys:
                pipe.sadd(REVERSE + fid, *keys)
        pipe.execute()
        return True  # _call answers None only on failure

    def _unindex(self, ids: Sequence[str]) -> bool:
        pipe = self.client.pipeline(transaction=False)
        for fid in ids:
            pipe.smembers(REVERSE + fid)
        held = pipe.execute()
        pipe = self.client.pipeline(transaction=True)
        for fid, keys in zip(ids, held):
            for k in keys:
                pipe.srem(k, fid)
            pipe.delete(REVERSE + fid)
        pipe.execute()
        return True

    def reindex(self, fragments: Sequence[Fragment], ids: Sequence[str]) -> None:
        """Make L1 say exactly what the store says about `ids` (`fragments`: those that exist)."""

        def run() -> None:
            self._unindex(ids)
            self._index_many((f.id, f.agent_id, list(f.keywords)) for f in fragments)

        self._call(run)

    def discard(self, ids: Sequence[str]) -> None:
        if ids:
            self._call(lambda: self._unindex(ids))

    # ------------------------------------------------------------ erasure (004 §5.1 forget mode=hard)

    name = "redis"  # an ErasureParticipant: the receipt's location and verify_erasure's check

    def erase(self, ids: Sequence[str], texts: Sequence[str] = ()) -> int:
        """Take erased memories out of L1 now (a keyword set left empty is gone, and with it the
        keyword in its name); how many memberships and reverse keys were removed. Redis down:
        RuntimeError; the rebuild when it is back prunes every id the store no longer has."""

        def run() -> int:
            pipe = self.client.pipeline(transaction=False)
            for fid in ids:
                pipe.smembers(REVERSE + fid)
            held = pipe.execute()
            self._unindex(ids)
            return sum(len(keys) + 1 for keys in held if keys)

        removed = self._call(run) if ids else 0
        if removed is None:
            raise RuntimeError("redis unavailable: the L1 keyword index is pruned when it is back")
        return removed

    def residue(self, ids: Sequence[str]) -> int:
        """How many L1 keys still hold one of `ids` (reverse keys, and keyword sets found by a
        SCAN of every one). RuntimeError when Redis does not answer."""

        def run() -> int:
            left = int(self.client.exists(*[REVERSE + fid for fid in ids])) if ids else 0
            cursor: Any = 0
            while True:
                cursor, names = self.client.scan(cursor, match=PREFIX + "*", count=self.batch)
                if names and ids:
                    pipe = self.client.pipeline(transaction=False)
                    for name in names:
                        for fid in ids:
                            pipe.sismember(name, fid)
                    left += sum(1 for member in pipe.execute() if member)
                if int(cursor) == 0:
                    return left

        found = self._call(run)
        if found is None:
            raise RuntimeError("redis unavailable")
        return found

    def prune(self) -> int:
        """Remove ids the store no longer has (consolidation, session expiry). -1 on failure."""
        removed = 0
        cursor: Any = 0
        while True:
            page = self._call(partial(self.client.scan, cursor, match=REVERSE + "*", count=self.batch))
            if page is None:
                return -1
            cursor, names = page
            ids = [n[len(REVERSE) :] for n in names]
            if ids:
                present = {f.id for f in self.store.get_many(SYSTEM, ids)}
                gone = [i for i in ids if i not in present]
                if gone and self._call(partial(self._unindex, gone)) is None:
                    return -1
                removed += len(gone)
            if int(cursor) == 0:
                return removed

    def on_change(self, event: ChangeEvent) -> None:
        """The MemoryService listener that keeps L1 in step with the store."""
        if self._down and time.monotonic() < self._retry_at:
            return  # the rebuild on recovery catches up
        if event.kind in ("created", "amended") and event.fragment_ids:
            ids = list(event.fragment_ids)
            self.reindex(self.store.get_many(SYSTEM, ids), ids)
        elif event.kind == "deleted":
            self.discard(list(event.fragment_ids))
        elif event.kind in ("consolidated", "session_ended"):
            self.prune()

    def close(self) -> None:
        self._closed = True
        thread = self._rebuilding
        if thread is not None:
            thread.join(5.0)
        if not self.owns_client:
            return
        try:
            self.client.close()
        except Exception:  # noqa: BLE001 - closing a dead connection
            pass
