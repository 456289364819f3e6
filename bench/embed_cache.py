"""A disk cache of embeddings for benchmarks: the same texts are embedded once per model.

Benchmarks that replay the same corpus many times (LoCoMo ablations, distractor runs, the HNSW
recall check) spend most of their time in the embedding model. `CachedEmbedder` wraps any real
embedder and keeps each vector it computes in one SQLite file per model name under the cache
directory (default `.cache/bench-embeddings`, ignored by git). Vectors are keyed by the kind
(passage or query) and the SHA-256 of the text, so a cached vector is exactly what the model
returned for that text; a cache never changes a figure, only how long it takes.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from memento.embeddings.protocol import Embedder

DEFAULT_DIR = Path(__file__).resolve().parents[1] / ".cache" / "bench-embeddings"


def _key(kind: str, text: str) -> str:
    return kind + ":" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class CachedEmbedder:
    """`inner`'s vectors, computed once and then read from `directory`."""

    def __init__(self, inner: Embedder, directory: Path = DEFAULT_DIR) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimensions = inner.dimensions
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / (re.sub(r"[^A-Za-z0-9_.-]+", "_", inner.name) + ".sqlite")
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)")
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def _lookup(self, keys: list[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                part = keys[i : i + 500]
                rows = self._db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(part))})", part)
                found.update((k, np.frombuffer(v, dtype=np.float32)) for k, v in rows)
        return found

    def _store(self, pairs: list[tuple[str, np.ndarray]]) -> None:
        with self._lock:
            self._db.executemany(
                "INSERT OR REPLACE INTO vectors (key, vector) VALUES (?, ?)",
                [(k, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for k, v in pairs],
            )

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        keys = [_key("p", t) for t in texts]
        found = self._lookup(keys)
        todo = [i for i, k in enumerate(keys) if k not in found]
        self.hits += len(keys) - len(todo)
        self.misses += len(todo)
        if todo:
            fresh = self.inner.embed_passages([texts[i] for i in todo])
            self._store([(keys[i], fresh[j]) for j, i in enumerate(todo)])
            found.update((keys[i], fresh[j]) for j, i in enumerate(todo))
        if not keys:
            return np.empty((0, self.dimensions), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        key = _key("q", text)
        found = self._lookup([key])
        if key in found:
            self.hits += 1
            return found[key]
        self.misses += 1
        vector = np.asarray(self.inner.embed_query(text), dtype=np.float32)
        self._store([(key, vector)])
        return vector

    def warm_up(self) -> None:
        warm = getattr(self.inner, "warm_up", None)
        if warm is not None:
            warm()
