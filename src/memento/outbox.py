"""The embedding outbox: writes commit their rows without waiting for the embedding provider, and
one background worker embeds them (issue 13, defect 5; docs/embeddings.md).

The outbox is durable because it is the rows themselves: a fragment without a vector of the
current model is pending (`Store.missing_embeddings`). A write tells the worker which rows it
acknowledged; the worker embeds them in batches and stores the vectors. At start-up it sweeps
the store for rows a crash (or a provider outage before a restart) left pending, in every
namespace, and for entities stored without a vector. A provider failure leaves the rows pending
and the worker backs off (doubling, up to a cap) before it tries again.

The worker reads and writes with the maintenance scope (it sees every namespace) and returns
nothing to anyone: a vector goes back to the row it was computed from, and only when the row
still holds the text it was computed from.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import cast

from .graph import EntityChanges
from .models import AgentScope
from .observe import Observer
from .storage.protocol import EntityStore, Store
from .vectorizer import BACKFILL_BATCH, Vectorizer

log = logging.getLogger(__name__)

MAINTENANCE = AgentScope("system")  # sees every namespace (models.MAINTENANCE_AGENTS)
FIRST_BACKOFF_S = 0.5
ENTITY_PAGE = 100
POLL_S = 0.05  # how often a waiter looks at the provider's health while it waits
PACE_KEEP = 0.8  # each batch weighs this much more in the worker's pace than the one before it


class Pace:
    """How long the provider takes for a batch of n rows, fitted over the worker's recent batches
    as t = call + row·n (each batch weighing PACE_KEEP times the next): a local model's time grows
    with the rows (call near 0), a remote provider's is mostly the call (row near 0). While every
    batch so far had one size the two cannot be told apart, and the estimate is the optimistic
    one: a batch of up to BACKFILL_BATCH rows as long as those."""

    def __init__(self) -> None:
        self.w = self.n = self.t = self.nn = self.nt = 0.0

    def add(self, rows: int, seconds: float) -> None:
        k = PACE_KEEP
        self.w, self.n, self.t = k * self.w + 1, k * self.n + rows, k * self.t + seconds
        self.nn, self.nt = k * self.nn + rows * rows, k * self.nt + rows * seconds

    def seconds(self, rows: int) -> float | None:
        """The time `rows` rows would take the worker (None: nothing embedded yet)."""
        if self.w == 0:
            return None
        calls = -(-rows // BACKFILL_BATCH)
        mean_n, mean_t = self.n / self.w, self.t / self.w
        spread = self.nn / self.w - mean_n * mean_n
        if spread < 0.25:  # one batch size so far
            return calls * mean_t
        row = max(0.0, (self.nt / self.w - mean_n * mean_t) / spread)
        return calls * max(0.0, mean_t - row * mean_n) + row * rows


def entity_text(name: str, description: str | None) -> str:
    """What an entity's vector embeds (001 §3.3): its name and description."""
    return f"{name} {description}".strip() if description else name


class EmbeddingOutbox:
    """The background embedding worker of one service (a daemon thread, started on first use)."""

    def __init__(
        self, vectors: Vectorizer, store: Store, observers: Observer, clock: Callable[[], datetime], *, max_backoff_s: float = 60.0
    ) -> None:
        self.vectors = vectors
        self.clock = clock
        self.store = store
        self.entities = cast(EntityStore, store)  # every backend is an AppStore (storage/protocol.py)
        self.observers = observers
        self.max_backoff_s = max_backoff_s
        self._cond = threading.Condition()
        self._fragments: dict[str, str] = {}  # fragment id -> namespace, acknowledged and not embedded yet
        self._entity_ids: dict[str, str] = {}  # entity id -> namespace, stored without a vector
        self._sweep = True  # the first round looks for leftovers in the whole store
        self._wake = False
        self._busy = False
        self._stopping = False
        self._backoff = 0.0
        self._rounds = 0  # rounds begun
        self._last_failed = 0  # the number of the last round that failed
        self._thread: threading.Thread | None = None
        self._backoff_skip = False  # drain asked for a try now, not after the back-off
        self._redo: set[str] = set()  # rows that may hold a vector of an older text: embedded again
        self._pace = Pace()  # how long the provider has taken for the worker's recent batches

    # ------------------------------------------------------------ the write side

    def start(self) -> None:
        """Start the worker (idempotent); its first round sweeps the store for leftovers."""
        if self.vectors.embedder is None:
            return
        with self._cond:
            if self._thread is not None or self._stopping:
                return
            self._thread = threading.Thread(target=self._run, name="memento-embedding-outbox", daemon=True)
            self._thread.start()

    def fragments_owed(self, agent_id: str, fragment_ids: Iterable[str]) -> None:
        """Called after a commit that created or changed these fragments of `agent_id`'s namespace:
        those without a vector are the worker's to embed (it looks; the caller need not)."""
        if self.vectors.embedder is not None:
            self._owe(self._fragments, dict.fromkeys(fragment_ids, agent_id))

    def sweep(self) -> None:
        """Look through the whole store for rows without a vector (after a bulk import, say)."""
        if self.vectors.embedder is not None:
            with self._cond:
                self._sweep = True
            self._owe(self._fragments, {})

    def entity_written(self, entity_id: str, agent_id: str) -> None:
        """Called after a commit: an entity whose vector was not ready (or is now stale)."""
        if self.vectors.embedder is not None:
            self._owe(self._entity_ids, {entity_id: agent_id})

    def _owe(self, queue: dict[str, str], owed: dict[str, str]) -> None:
        self.start()
        with self._cond:
            queue.update(owed)
            self._wake = True
            self._cond.notify_all()

    # ------------------------------------------------------------ the read side

    def pending(self) -> int:
        """Rows (fragments and entities) this process acknowledged and the worker has not embedded."""
        with self._cond:
            return len(self._fragments) + len(self._entity_ids)

    def settle(self, agents: tuple[str, ...] | None, timeout_s: float) -> bool:
        """Wait at most `timeout_s` until the rows of `agents`' namespaces (None: all) acknowledged
        before this call are embedded. Returns at once when the provider is failing or a call has
        been hanging longer than the wait allows. True: nothing of theirs is pending."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            owed = {i for i, a in (*self._fragments.items(), *self._entity_ids.items()) if agents is None or a in agents}
            while owed:
                owed &= self._fragments.keys() | self._entity_ids.keys()
                if not owed:
                    break
                left = deadline - time.monotonic()
                if left <= 0 or self._stopping or self._backoff > 0 or self.vectors.stalled(timeout_s) or self._later_than(owed, left):
                    return False
                self._cond.wait(min(left, POLL_S))
        return True

    def _later_than(self, owed: set[str], left: float) -> bool:
        """Whether, at the worker's recent pace (Pace), the last of `owed` will not be embedded
        within `left` seconds (with the lock held): rows are embedded in the order they were
        acknowledged, so the rows ahead of it count as well. A recall behind a long backlog (a
        burst of writes, a busy machine) then goes on at once instead of waiting out the whole
        wait for nothing; its full-text tier finds the newest rows by their words meanwhile."""
        ahead = 0
        for position, fid in enumerate((*self._fragments, *self._entity_ids), start=1):
            if fid in owed:
                ahead = position
        needed = self._pace.seconds(ahead)
        return needed is not None and needed > left

    def drain(self, timeout_s: float, *, sweep: bool = True) -> bool:
        """Wait at most `timeout_s` until nothing acknowledged is pending (and, `sweep`, the sweep
        for leftovers is done); a worker backing off tries again now, and a failed try ends the
        wait. True: done."""
        if self.vectors.embedder is None:
            return True
        self.start()
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._wake = True
            self._backoff_skip = True
            self._cond.notify_all()
            begun = self._rounds  # a round already running may have begun before the provider recovered
            while self._fragments or self._entity_ids or (sweep and (self._sweep or self._busy or self._wake)):
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None or not self._thread.is_alive():
                    return False
                if self._last_failed > begun:
                    return False  # it tried once more and the provider still fails
                self._cond.wait(min(left, POLL_S))
        return True

    def stop(self, timeout_s: float) -> None:
        """Stop the worker: wait at most `timeout_s` for what is pending, then leave the rest to the
        next start (or consolidation), saying so in the log."""
        if self._thread is None:
            self.vectors.close()
            return
        done = self.drain(timeout_s, sweep=False)  # this process's writes; leftovers wait for the next start
        with self._cond:
            self._stopping = True
            left = len(self._fragments) + len(self._entity_ids)
            self._cond.notify_all()
        if not done and left:
            log.warning("closing with %d embedding(s) pending: they are embedded at the next start or consolidation", left)
        thread = self._thread
        thread.join(timeout=max(timeout_s, 0.1))
        self.vectors.close()

    # ------------------------------------------------------------ the worker

    def _run(self) -> None:
        while True:
            with self._cond:
                while not (self._wake or self._stopping):
                    self._cond.wait()
                if self._stopping:
                    return
                self._wake = False
                self._busy = True
                self._rounds += 1
                number = self._rounds
                self._backoff_skip = False  # a drain from now on asks for a try without the back-off
            try:
                ok = self._round()
            except Exception:  # a database error must not end the worker: the rows stay pending
                log.exception("embedding worker round failed")
                ok = False
            self._after_round(ok, number)

    def _after_round(self, ok: bool, number: int) -> None:
        with self._cond:
            self._busy = False
            if not ok:
                self._last_failed = number
            if ok:
                self._backoff = 0.0
            else:
                self._backoff = min(self.max_backoff_s, self._backoff * 2 if self._backoff else FIRST_BACKOFF_S)
            self._cond.notify_all()
            if ok:
                return
            deadline = time.monotonic() + self._backoff
            while not (self._stopping or self._backoff_skip) and (left := deadline - time.monotonic()) > 0:
                self._cond.wait(left)
            self._wake = True  # try again: the rows are still pending

    def _round(self) -> bool:
        """Embed what is owed; False when the provider failed (the rest stays pending)."""
        with self._cond:
            sweep = self._sweep
        if sweep:
            if not self._sweep_fragments() or not self._sweep_entities():
                return False
            with self._cond:
                self._sweep = False
                self._cond.notify_all()
        while True:
            with self._cond:
                ids = list(self._fragments)[:BACKFILL_BATCH]
            if not ids:
                break
            todo = [(f.id, f.content) for f in self.store.get_many(MAINTENANCE, ids) if not f.has_embedding or f.id in self._redo]
            if not self._embed_fragments(todo, ids):
                return False
        while True:
            with self._cond:
                ids = list(self._entity_ids)[:BACKFILL_BATCH]
            if not ids:
                return True
            if not self._embed_entities(ids):
                return False

    def _sweep_fragments(self) -> bool:
        """Every namespace's rows without a vector of the current model (a crash's leftovers)."""
        after = 0
        while not self._stopping:
            batch = self.store.missing_embeddings(MAINTENANCE, BACKFILL_BATCH, after)
            if not batch:
                return True
            after = batch[-1][0]
            if not self._embed_fragments([(fid, content) for _, fid, content in batch], [fid for _, fid, _ in batch]):
                return False
        return True

    def _sweep_entities(self) -> bool:
        offset = 0
        while not self._stopping:
            page, total = self.entities.list_entities(MAINTENANCE, entity_type=None, name_contains=None, limit=ENTITY_PAGE, offset=offset)
            missing = [e for e in page if not e.has_embedding]
            if missing:
                with self._cond:
                    self._entity_ids.update({e.id: e.agent_id for e in missing})
            offset += len(page)
            if not page or offset >= total:
                return True
        return True

    def _embed_fragments(self, todo: list[tuple[str, str]], owed: list[str]) -> bool:
        """Embed the (id, content) rows and store each vector if its row still holds the text;
        `owed` ids are settled (embedded, or gone meanwhile) when the batch is done."""
        if todo:
            started = time.perf_counter()
            try:
                vectors = self.vectors.passages([content for _, content in todo])
            except Exception as exc:  # noqa: BLE001 - provider down or hanging: the rows stay pending
                self.observers.embedding_batch(len(todo), time.perf_counter() - started, exc)
                log.warning("embedding worker: provider failed, %d row(s) stay pending: %s", len(todo), exc)
                return False
            ids = [fid for fid, _ in todo]
            now = {f.id: f.content for f in self.store.get_many(MAINTENANCE, ids)}
            for (fid, content), vector in zip(todo, vectors):
                if now.get(fid) == content:
                    self.store.set_embedding(fid, vector)
            # Amended meanwhile (before the check, or between it and the write, which then stored a
            # vector of the old text): the row's current text is embedded again, whatever it holds.
            after = {f.id: f.content for f in self.store.get_many(MAINTENANCE, ids)}
            stale = {fid: self._owner(fid) for fid, content in todo if fid in after and after[fid] != content}
            took = time.perf_counter() - started
            self.observers.embedding_batch(len(todo), took, None)
            with self._cond:
                self._pace.add(len(todo), took)
                self._redo.difference_update(ids)
                self._redo.update(stale)
                self._fragments.update(stale)
        with self._cond:
            for fid in owed:
                if fid not in self._redo:
                    self._fragments.pop(fid, None)
            self._cond.notify_all()
        return True

    def _owner(self, fragment_id: str) -> str:
        with self._cond:
            return self._fragments.get(fragment_id, "")

    def _embed_entities(self, ids: list[str]) -> bool:
        found = self.entities.get_entities(MAINTENANCE, ids)
        if found:
            started = time.perf_counter()
            try:
                vectors = self.vectors.passages([entity_text(e.name, e.description) for e in found])
            except Exception as exc:  # noqa: BLE001 - the entities stay pending
                self.observers.embedding_batch(len(found), time.perf_counter() - started, exc)
                log.warning("embedding worker: provider failed, %d entit(ies) stay pending: %s", len(found), exc)
                return False
            now = {e.id: entity_text(e.name, e.description) for e in self.entities.get_entities(MAINTENANCE, ids)}
            for entity, vector in zip(found, vectors):
                text = entity_text(entity.name, entity.description)
                if now.get(entity.id) == text:
                    self.entities.update_entity(MAINTENANCE, entity.id, EntityChanges(embedding=vector), self.clock())
                elif entity.id in now:  # renamed or described anew meanwhile: embedded again next
                    ids = [i for i in ids if i != entity.id]
            self.observers.embedding_batch(len(found), time.perf_counter() - started, None)
        with self._cond:
            for eid in ids:
                self._entity_ids.pop(eid, None)
            self._cond.notify_all()
        return True
