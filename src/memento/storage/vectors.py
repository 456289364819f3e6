"""Per-agent vector indexes: exact search for small stores, an HNSW graph (usearch) for large ones.

Vectors are canonical in the database; an index is derived, and other processes (a second
server, the CLI, `memento reindex`) write the same database. The database numbers every vector
write on a rising clock and logs which fragment it touched (SQLite migration 0003). An index
carries a stamp: every change numbered up to it is reflected. Before it answers, an index whose
stamp is behind the clock loads only the fragments changed since, or rebuilds when most of it
changed. Saved beside the database with its stamp, it is reloaded and caught up the same way, so
neither a crash nor another writer ever costs a wrong answer.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import secrets
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
from usearch.index import Index

log = logging.getLogger(__name__)

CATCH_UP_MIN = 1024  # below this many changed fragments, catching up always beats a rebuild

# HNSW parameters (settings HNSW_M, HNSW_EF_CONSTRUCTION, HNSW_EF_SEARCH), chosen by
# bench/hnsw_recall.py on the default model's vectors (docs/benchmarks.md): the seed's m=16,
# ef_construction=64 gave recall@10 0.976 at 30k vectors and falls with size; m=32,
# ef_construction=128 gave 0.993 at the same ef_search. An index saved before its metadata
# recorded them was built with m=16, ef_construction=64.
DEFAULT_M = 32
DEFAULT_EF_CONSTRUCTION = 128
DEFAULT_EF_SEARCH = 512
LEGACY_EF_CONSTRUCTION = 64

Span = tuple[int, int]  # the clock just before and just after one committed write

# An agent with more vectors than this has its graph built in a background thread (usearch adds
# ~700-1,000 vectors a second on two cores with the parameters above: 25 minutes for a million),
# its searches meanwhile an exact scan of the vectors as they were loaded (~40-75 ms at a
# million). Below it the first search builds the graph itself (a few seconds).
BACKGROUND_BUILD = 5_000
BUILD_CHUNK = 1024  # vectors added between two looks at whether the build was called off


class VectorSource(Protocol):
    """What an index reads from the database."""

    def identity(self) -> str:
        """Names the database, so a saved index is never loaded into another one."""
        ...

    def clock(self) -> int:
        """The number of the latest committed vector change."""
        ...

    def load(self, agent: str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """All of an agent's vectors of the index's model, as (keys, vectors) batches."""
        ...

    def count(self, agent: str) -> int:
        """How many vectors of the index's model the agent has."""
        ...

    def count_changes(self, agent: str, after: int, limit: int) -> int:
        """How many of the agent's fragments changed after `after` (counting stops at `limit`)."""
        ...

    def changes(self, agent: str, after: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Batches of (changed keys, those of them with a vector now, their vectors)."""
        ...


@dataclass(eq=False)
class _Building:
    """A graph being built beside the searches, from the vectors loaded at the entry's stamp;
    until it is done they are searched exactly (`search_exact`)."""

    keys: np.ndarray  # uint64
    vectors: np.ndarray  # float32, one row a key, scaled to unit length
    stop: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)

    def search_exact(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        if not len(self.keys) or k <= 0:
            return []
        query = vector.astype(np.float32)
        norm = float(np.linalg.norm(query))
        similarities = self.vectors @ (query / norm if norm else query)
        k = min(k, len(similarities))
        top = np.argpartition(-similarities, k - 1)[:k]
        top = top[np.argsort(-similarities[top], kind="stable")]
        return [(int(self.keys[i]), float(similarities[i])) for i in top]


@dataclass
class _AgentIndex:
    index: Index
    stamp: int  # every change numbered up to this is reflected
    saved: int | None  # the stamp of the copy on disk, when it came from or went there
    lock: threading.RLock
    built_with: int  # the ef_construction its graph was built with (usearch does not save it)
    building: _Building | None = None  # the graph is being built: `index` is empty meanwhile


class VectorIndex:
    """Holds one usearch index per agent, built lazily from the database and kept current with it."""

    def __init__(
        self,
        dimensions: int,
        model: str,
        directory: Path | None,
        source: VectorSource,
        ann_threshold: int = 5000,
        ef_search: int = DEFAULT_EF_SEARCH,
        m: int = DEFAULT_M,
        ef_construction: int = DEFAULT_EF_CONSTRUCTION,
        background_build: int = BACKGROUND_BUILD,
    ) -> None:
        if m < 2 or ef_construction < 1 or ef_search < 1:
            raise ValueError("HNSW m must be at least 2, ef_construction and ef_search at least 1")
        self.dimensions = dimensions
        self.model = model
        self.directory = directory
        self.source = source
        self.ann_threshold = ann_threshold
        self.ef_search = ef_search
        self.m = m
        self.ef_construction = ef_construction
        self.background_build = background_build
        self._agents: dict[str, _AgentIndex] = {}
        self._opening: dict[str, threading.Lock] = {}  # an agent's index being opened (loaded or built)
        self._builds: set[_Building] = set()  # background builds still running (some maybe called off)
        _OPEN.add(self)
        self._lock = threading.Lock()
        self._closed = threading.Event()

    def _new_index(self) -> Index:
        """An empty graph with the configured parameters (cosine, half-precision vectors)."""
        return Index(
            ndim=self.dimensions,
            metric="cos",
            dtype="f16",
            connectivity=self.m,
            expansion_add=self.ef_construction,
            expansion_search=self.ef_search,
        )

    def set_ef_search(self, ef_search: int) -> None:
        """Change the query-time candidate list of every index, loaded now or later (a graph's
        links do not depend on it, so nothing is rebuilt)."""
        if ef_search < 1:
            raise ValueError("ef_search must be at least 1")
        self.ef_search = ef_search
        with self._lock:
            entries = list(self._agents.values())
        for entry in entries:
            with entry.lock:
                entry.index.expansion_search = ef_search  # type: ignore[misc]  # a setter usearch types as read-only

    def parameters(self, agent: str) -> dict[str, int]:
        """The HNSW parameters the agent's index was built with and searches with."""
        entry = self._get(agent)
        with entry.lock:
            return {"m": int(entry.index.connectivity), "ef_construction": entry.built_with, "ef_search": int(entry.index.expansion_search)}

    def _prefix(self, agent: str) -> str:
        """The name of the agent's saved files for this model and size. Indexes of two models
        (a store whose embedding provider changed, a process configured with another) are saved
        side by side: under one name a save of either removed the other's graph."""
        return hashlib.sha256(f"{agent}\0{self.model}\0{self.dimensions}".encode()).hexdigest()[:20]

    def _legacy_prefix(self, agent: str) -> str:
        """The name of the agent's saved files before the model was part of it (still loaded when
        they hold this model's index; replaced by the next save)."""
        return hashlib.sha256(agent.encode()).hexdigest()[:20]

    def _get(self, agent: str) -> _AgentIndex:
        """The agent's index, opened on first use. Opening one agent's (a load, a build) holds up
        only the searches of that agent: the others go on."""
        with self._lock:
            entry = self._agents.get(agent)
            if entry is not None:
                return entry
            opening = self._opening.setdefault(agent, threading.Lock())
        with opening:
            with self._lock:
                entry = self._agents.get(agent)
            if entry is None:
                entry = self._open(agent)
                with self._lock:
                    self._agents[agent] = entry
                    self._opening.pop(agent, None)
            return entry

    def _open(self, agent: str) -> _AgentIndex:
        clock = self.source.clock()
        entry = self._load_saved(agent, clock)
        if entry is not None:
            self._catch_up(agent, entry)
            return entry
        entry = _AgentIndex(self._new_index(), clock, None, threading.RLock(), self.ef_construction)
        self._renew(agent, entry, clock)
        return entry

    def _renew(self, agent: str, entry: _AgentIndex, clock: int) -> None:
        """Build the entry's graph from the database as of `clock` (entry lock held, or the entry
        not yet shared): at once when the agent has few vectors, else beside the searches."""
        if entry.building is not None:
            entry.building.stop.set()
            entry.building = None
        entry.stamp, entry.built_with = clock, self.ef_construction
        if self.source.count(agent) <= self.background_build:
            entry.index = self._build(agent)
            return
        if self.directory is not None:
            self.source.identity()  # read now: the build saves its graph, maybe as the store closes
        entry.index = self._new_index()
        keys, vectors = self._load_all(agent)
        entry.building = _Building(keys, vectors)
        with self._lock:
            self._builds.add(entry.building)
        log.info("vector index for an agent: building its graph over %d vectors in the background; exact search meanwhile", len(keys))
        threading.Thread(target=self._build_beside, args=(agent, entry, entry.building), name="memento-vector-build", daemon=True).start()

    def _load_all(self, agent: str) -> tuple[np.ndarray, np.ndarray]:
        """Every vector of the agent in one array (sized by a count first: a million vectors are
        1.5 GB), each scaled to unit length, and their keys."""
        expected = self.source.count(agent)
        keys = np.empty(expected, dtype=np.uint64)
        vectors = np.empty((expected, self.dimensions), dtype=np.float32)
        filled, extra = 0, []
        for batch_keys, batch in self.source.load(agent):
            room = max(0, min(len(batch_keys), expected - filled))
            keys[filled : filled + room], vectors[filled : filled + room] = batch_keys[:room], batch[:room]
            filled += room
            if room < len(batch_keys):  # written since the count
                extra.append((batch_keys[room:], batch[room:]))
        if extra:
            keys = np.concatenate([keys[:filled], *(k for k, _ in extra)])
            vectors = np.concatenate([vectors[:filled], *(v for _, v in extra)])
        else:
            keys, vectors = keys[:filled], vectors[:filled]
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        np.divide(vectors, norms, out=vectors, where=norms > 0)
        return keys, vectors

    def _build_beside(self, agent: str, entry: _AgentIndex, building: _Building) -> None:
        """The background build: the graph of `building`'s vectors, put in place when done (the
        next search then catches up with what was written meanwhile) and saved."""
        try:
            index, total, began = self._new_index(), len(building.keys), time.monotonic()
            tenth = max(1, total // 10)
            for start in range(0, total, BUILD_CHUNK):
                if building.stop.is_set() or self._closed.is_set():
                    return
                index.add(building.keys[start : start + BUILD_CHUNK], building.vectors[start : start + BUILD_CHUNK], threads=2)
                done = min(total, start + BUILD_CHUNK)
                if done // tenth > start // tenth and done < total:  # progress, a tenth at a time
                    took = time.monotonic() - began
                    log.info(
                        "vector index for an agent: graph %d/%d vectors (%d%%), ~%.0f s left",
                        done,
                        total,
                        100 * done // total,
                        took * (total - done) / done,
                    )
            with entry.lock:
                if entry.building is not building or self._closed.is_set():
                    return  # rebuilt meanwhile (an erasure), or the store closed
                index.expansion_search = self.ef_search  # type: ignore[misc]  # set_ef_search may have come meanwhile
                entry.index, entry.building = index, None
                log.info("vector index for an agent: graph built over %d vectors in %.0f s", len(index), time.monotonic() - began)
                if self.directory is not None:
                    self._write(agent, entry)  # a restart loads it instead of building again
        except Exception:  # derived data: the exact search goes on; the next start builds again
            log.exception("vector index for an agent: the background build failed")
        finally:
            with self._lock:
                self._builds.discard(building)
            building.done.set()

    def ready(self, agent: str, timeout: float | None = None) -> bool:
        """Whether the agent's graph is built (after waiting up to `timeout` seconds for a
        background build; None waits for it)."""
        entry = self._get(agent)
        deadline = None if timeout is None else time.monotonic() + timeout
        while (building := entry.building) is not None:
            if not building.done.wait(None if deadline is None else max(0.0, deadline - time.monotonic())):
                return False
            if entry.building is building:
                return False  # the build failed (logged): the searches stay exact
        return True  # (a build that finished, or one that a rebuild replaced and then finished too)

    def close(self, wait_s: float = 30.0) -> None:
        """Call off the background builds, and wait (at most `wait_s`) for each to leave the
        chunk of vectors it is adding: a process that exits while usearch's threads run aborts."""
        self._closed.set()
        with self._lock:
            building = list(self._builds)
        deadline = time.monotonic() + wait_s
        for b in building:
            b.done.wait(max(0.0, deadline - time.monotonic()))

    def _load_saved(self, agent: str, clock: int) -> _AgentIndex | None:
        if self.directory is None:
            return None
        for prefix in (self._prefix(agent), self._legacy_prefix(agent)):
            if (self.directory / f"{prefix}.json").exists():
                return self._load_file(agent, prefix, clock)
        return None

    def _load_file(self, agent: str, prefix: str, clock: int) -> _AgentIndex | None:
        assert self.directory is not None
        meta_path = self.directory / f"{prefix}.json"
        try:
            meta = json.loads(meta_path.read_text())
            stamp, name = meta.get("change"), meta.get("file")
            expected = (self.source.identity(), self.model, self.dimensions)
            if (meta.get("instance"), meta.get("model"), meta.get("dim")) != expected:
                return None
            if not isinstance(stamp, int) or stamp > clock:
                return None  # the database went back in time (restored from a copy): rebuild
            if not isinstance(name, str) or not name.startswith(prefix) or Path(name).name != name:
                return None
            built_with = meta.get("ef_construction", LEGACY_EF_CONSTRUCTION)
            if built_with != self.ef_construction:
                log.info(
                    "vector index for an agent built with ef_construction %s, configured %d: rebuilding", built_with, self.ef_construction
                )
                return None
            index = self._new_index()
            index.load(str(self.directory / name))  # the file's own m (connectivity) comes with it
            if index.connectivity != self.m or index.ndim != self.dimensions:
                log.info("vector index for an agent built with m=%d, configured m=%d: rebuilding", index.connectivity, self.m)
                return None
            index.expansion_search = self.ef_search  # type: ignore[misc]
            return _AgentIndex(index, stamp, stamp, threading.RLock(), built_with)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, RuntimeError) as exc:
            log.warning("vector index for an agent unreadable, rebuilding: %s", exc)
            return None

    def _build(self, agent: str) -> Index:
        index = self._new_index()
        total = 0
        for keys, vectors in self.source.load(agent):
            index.add(keys, vectors, threads=2)
            total += len(keys)
        if total > 10_000:
            log.info("built vector index: %d vectors", total)
        return index

    def _catch_up(self, agent: str, entry: _AgentIndex) -> None:
        """Apply what other writers changed since the entry's stamp (entry lock held)."""
        clock = self.source.clock()
        if clock == entry.stamp:
            return
        budget = max(CATCH_UP_MIN, len(entry.index) // 2)
        if clock > entry.stamp and self.source.count_changes(agent, entry.stamp, budget + 1) <= budget:
            for changed, keys, vectors in self.source.changes(agent, entry.stamp):
                entry.index.remove(changed)
                if len(keys):
                    entry.index.add(keys, vectors)
        else:  # most of the index changed (a reindex), or the database went back in time
            self._renew(agent, entry, clock)
        entry.stamp = clock

    def _apply(self, agent: str, span: Span, keys: list[int], vector: np.ndarray | None) -> None:
        entry = self._get(agent)
        before, after = span
        with entry.lock:
            if entry.building is not None:
                return  # the graph's first catch-up reads it from the database
            if after <= entry.stamp:
                return  # a catch-up already read this write (or a later one) from the database
            entry.index.remove(np.array(keys, dtype=np.uint64))
            if vector is not None:
                entry.index.add(keys[0], vector.astype(np.float32))
            if before == entry.stamp:
                entry.stamp = after  # nothing in between was missed
            # otherwise another write lies between the stamp and this one: the next catch-up
            # reads both, and the stamp does not claim what the index never saw

    def add(self, agent: str, key: int, vector: np.ndarray, span: Span) -> None:
        """Apply a committed vector write of this process, made over the clock `span`."""
        self._apply(agent, span, [key], vector)

    def remove(self, agent: str, keys: list[int], span: Span) -> None:
        """Apply a committed deletion of this process, made over the clock `span`."""
        self._apply(agent, span, keys, None)

    def search(self, agent: str, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(key, cosine similarity) pairs, best first, after catching up with the database."""
        entry = self._get(agent)
        with entry.lock:
            if entry.building is not None:
                return entry.building.search_exact(vector, k)
            self._catch_up(agent, entry)
            size = len(entry.index)
            if size == 0:
                return []
            exact = size <= self.ann_threshold
            found = entry.index.search(vector.astype(np.float32), min(k, size), exact=exact)
            return [(int(key), 1.0 - float(dist)) for key, dist in zip(found.keys, found.distances)]

    def size(self, agent: str) -> int:
        """How many vectors the agent's index holds, after catching up."""
        entry = self._get(agent)
        with entry.lock:
            if entry.building is not None:
                return len(entry.building.keys)
            self._catch_up(agent, entry)
            return len(entry.index)

    def held(self, agent: str, keys: np.ndarray) -> int:
        """How many of `keys` the agent's index holds, after catching up."""
        entry = self._get(agent)
        with entry.lock:
            if entry.building is not None:
                return int(np.count_nonzero(np.isin(keys.astype(np.uint64), entry.building.keys)))
            self._catch_up(agent, entry)
            if not len(keys) or not len(entry.index):
                return 0
            return int(np.count_nonzero(entry.index.contains(keys.astype(np.uint64))))

    def rebuild(self, agent: str) -> int:
        """Rebuild the agent's index from the database and replace its saved copy. A removal only
        marks a vector deleted (its bytes stay in memory and in the next saved file); after an
        erasure nothing of the removed vectors may remain. An agent with few vectors is rebuilt
        at once and saved; a large one's saved copy is removed at once and its graph built in the
        background from the vectors as they are now (its searches exact meanwhile, the graph saved
        when done). How many saved copies were replaced or removed."""
        entry = self._get(agent)
        with entry.lock:
            self._renew(agent, entry, self.source.clock())  # a build under way (the erased vectors in it) is called off
            entry.saved = None
            if self.directory is None:
                return 0
            if entry.building is None:
                self._write(agent, entry)
            else:
                self._remove_saved(agent)
            return 1

    def _remove_saved(self, agent: str) -> None:
        """Remove the agent's saved copy of this model's index (a rebuild in the background
        saves a new one when done)."""
        assert self.directory is not None
        prefix = self._prefix(agent)
        (self.directory / f"{prefix}.json").unlink(missing_ok=True)
        for old in self.directory.glob(f"{prefix}*"):
            if old.suffix in (".usearch", ".tmp"):
                old.unlink(missing_ok=True)
        self._drop_legacy(agent)

    def save(self) -> None:
        """Persist every loaded index that changed, stamped with what it has really seen."""
        if self.directory is None:
            return
        with self._lock:
            items = list(self._agents.items())
        for agent, entry in items:
            with entry.lock:
                if entry.stamp == entry.saved or entry.building is not None:
                    continue  # unchanged, or the graph is not there yet
                try:
                    self._write(agent, entry)
                except (OSError, RuntimeError) as exc:  # derived data: the next start rebuilds
                    log.warning("vector index for an agent not saved: %s", exc)

    def _write(self, agent: str, entry: _AgentIndex) -> None:
        """Index file first (a fresh name), then the metadata naming it, atomically; so two
        processes saving at once never pair one's index with the other's stamp."""
        assert self.directory is not None
        self.directory.mkdir(parents=True, exist_ok=True)
        prefix, token = self._prefix(agent), secrets.token_hex(6)
        name = f"{prefix}-{entry.stamp}-{token}.usearch"
        entry.index.save(str(self.directory / name))
        _fsync(self.directory / name)
        meta = {
            "instance": self.source.identity(),
            "model": self.model,
            "dim": self.dimensions,
            "change": entry.stamp,
            "file": name,
            "m": int(entry.index.connectivity),
            "ef_construction": entry.built_with,
        }
        tmp = self.directory / f"{prefix}.{token}.tmp"
        tmp.write_text(json.dumps(meta))
        _fsync(tmp)
        os.replace(tmp, self.directory / f"{prefix}.json")
        entry.saved = entry.stamp
        for old in self.directory.glob(f"{prefix}*"):
            if old.suffix in (".usearch", ".tmp") and old.name != name:
                old.unlink(missing_ok=True)  # a concurrent saver's file: it then rebuilds, never errs
        self._drop_legacy(agent)

    def _drop_legacy(self, agent: str) -> None:
        """Remove the agent's files saved under the name without the model, when they hold this
        model's index (now saved under its own name); another model's stay."""
        assert self.directory is not None
        legacy = self.directory / f"{self._legacy_prefix(agent)}.json"
        try:
            meta = json.loads(legacy.read_text())
        except (OSError, ValueError):
            return
        if (meta.get("model"), meta.get("dim")) != (self.model, self.dimensions):
            return
        name = meta.get("file")
        legacy.unlink(missing_ok=True)
        if isinstance(name, str) and Path(name).name == name and name.startswith(self._legacy_prefix(agent)):
            (self.directory / name).unlink(missing_ok=True)


_OPEN: weakref.WeakSet[VectorIndex] = weakref.WeakSet()


@atexit.register
def _close_at_exit() -> None:
    """A process that exits without closing its store (a script, an interrupted command) still
    calls its background builds off: exiting while usearch's threads run aborts the process."""
    for index in list(_OPEN):
        index.close(wait_s=10.0)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
