"""Per-agent vector indexes: exact search for small stores, an HNSW graph (usearch) for large ones.

Vectors are canonical in the database; an index is derived. It is saved beside the database on
close together with the agent's vector generation and reloaded only when that generation still
matches, so a crash costs a rebuild, never a wrong answer.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
from usearch.index import Index

log = logging.getLogger(__name__)

VectorLoader = Callable[[str], Iterator[tuple[np.ndarray, np.ndarray]]]  # agent -> (keys, vectors) batches
GenerationReader = Callable[[str], int]


@dataclass
class _AgentIndex:
    index: Index
    generation: int
    lock: threading.RLock


class VectorIndex:
    """Holds one usearch index per agent, built lazily from the database."""

    def __init__(
        self,
        dimensions: int,
        directory: Path | None,
        load: VectorLoader,
        generation: GenerationReader,
        ann_threshold: int = 5000,
        ef_search: int = 512,
    ) -> None:
        self.dimensions = dimensions
        self.directory = directory
        self._load = load
        self._generation = generation
        self.ann_threshold = ann_threshold
        self.ef_search = ef_search
        self._agents: dict[str, _AgentIndex] = {}
        self._lock = threading.Lock()

    def _new_index(self) -> Index:
        # The seed's HNSW parameters (000 §3.1): m=16, ef_construction=64, cosine.
        return Index(
            ndim=self.dimensions,
            metric="cos",
            dtype="f16",
            connectivity=16,
            expansion_add=64,
            expansion_search=self.ef_search,
        )

    def _paths(self, agent: str) -> tuple[Path, Path] | None:
        if self.directory is None:
            return None
        name = hashlib.sha256(agent.encode()).hexdigest()[:20]
        return self.directory / f"{name}.usearch", self.directory / f"{name}.json"

    def _get(self, agent: str) -> _AgentIndex:
        with self._lock:
            entry = self._agents.get(agent)
            if entry is None:
                entry = self._open(agent)
                self._agents[agent] = entry
            return entry

    def _open(self, agent: str) -> _AgentIndex:
        generation = self._generation(agent)
        paths = self._paths(agent)
        if paths and paths[0].exists() and paths[1].exists():
            try:
                meta = json.loads(paths[1].read_text())
                if meta.get("generation") == generation and meta.get("dim") == self.dimensions:
                    index = self._new_index()
                    index.load(str(paths[0]))
                    return _AgentIndex(index, generation, threading.RLock())
            except (OSError, ValueError, RuntimeError) as exc:
                log.warning("vector index for an agent unreadable, rebuilding: %s", exc)
        return _AgentIndex(self._build(agent), generation, threading.RLock())

    def _build(self, agent: str) -> Index:
        index = self._new_index()
        total = 0
        for keys, vectors in self._load(agent):
            index.add(keys, vectors, threads=2)
            total += len(keys)
        if total > 10_000:
            log.info("built vector index: %d vectors", total)
        return index

    def add(self, agent: str, key: int, vector: np.ndarray, generation: int) -> None:
        """Apply a committed vector write; `generation` is the database's after that write."""
        entry = self._get(agent)
        with entry.lock:
            if key in entry.index:
                entry.index.remove(key)
            entry.index.add(key, vector.astype(np.float32))
            entry.generation = generation

    def remove(self, agent: str, keys: list[int], generation: int) -> None:
        """Apply a committed deletion; `generation` is the database's after it."""
        entry = self._get(agent)
        with entry.lock:
            for key in keys:
                if key in entry.index:
                    entry.index.remove(key)
            entry.generation = generation

    def search(self, agent: str, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(key, cosine similarity) pairs, best first."""
        entry = self._get(agent)
        with entry.lock:
            size = len(entry.index)
            if size == 0:
                return []
            exact = size <= self.ann_threshold
            found = entry.index.search(vector.astype(np.float32), min(k, size), exact=exact)
            return [(int(key), 1.0 - float(dist)) for key, dist in zip(found.keys, found.distances)]

    def size(self, agent: str) -> int:
        return len(self._get(agent).index)

    def invalidate(self, agent: str | None = None) -> None:
        """Forget loaded indexes (all, or one agent's); they are rebuilt on next use."""
        with self._lock:
            if agent is None:
                self._agents.clear()
            else:
                self._agents.pop(agent, None)

    def save(self) -> None:
        """Persist every loaded index with the generation it reflects."""
        if self.directory is None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        with self._lock:
            items = list(self._agents.items())
        for agent, entry in items:
            paths = self._paths(agent)
            assert paths is not None
            with entry.lock:
                if entry.generation != self._generation(agent):
                    continue  # something changed the database behind our back: let it rebuild
                entry.index.save(str(paths[0]))
                paths[1].write_text(json.dumps({"generation": entry.generation, "dim": self.dimensions}))
