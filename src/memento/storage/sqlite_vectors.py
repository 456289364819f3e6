"""What the SQLite backend's vector indexes read: the change clock, the change log, the vectors.

The clock and the log are kept by triggers on `fragment_embeddings` (migration 0003), so every
writer, in any process, is seen. The queries here are the per-search freshness check (one
primary-key read) and the catch-up (an index range on the log, then the changed rows).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pysqlite3.dbapi2 as sqlite3

BATCH = 4096


def clock(conn: sqlite3.Connection) -> int:
    """The number of the latest vector change visible to `conn`."""
    return int(conn.execute("SELECT value FROM vector_clock WHERE id = 1").fetchone()[0])


def _batch(rows: list[tuple[int, bytes]]) -> tuple[np.ndarray, np.ndarray]:
    keys = np.array([r[0] for r in rows], dtype=np.uint64)
    vectors = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
    return keys, vectors.reshape(len(rows), -1)


class SQLiteVectorSource:
    """The VectorSource of one SQLite file, for one embedding model and size."""

    def __init__(
        self, reader: Callable[[], sqlite3.Connection], connect: Callable[[], sqlite3.Connection], model: str, dimensions: int
    ) -> None:
        self._reader = reader
        self._connect = connect
        self.model = model
        self.dimensions = dimensions
        self._identity: str | None = None

    def identity(self) -> str:
        if self._identity is None:
            row = self._reader().execute("SELECT instance FROM vector_clock WHERE id = 1").fetchone()
            self._identity = str(row[0])
        return self._identity

    def clock(self) -> int:
        return clock(self._reader())

    def load(self, agent: str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        # Its own connection: a long read that other calls on this thread's reader must not cut short.
        conn = self._connect()
        try:
            cursor = conn.execute(
                "SELECT seq, vector FROM fragment_embeddings WHERE agent_id = ? AND model = ? AND dim = ? ORDER BY seq",
                (agent, self.model, self.dimensions),
            )
            while batch := cursor.fetchmany(BATCH):
                yield _batch(batch)
        finally:
            conn.close()

    def count(self, agent: str) -> int:
        # From the (agent_id, model) index alone: a model's vectors all have its size.
        row = self._reader().execute("SELECT COUNT(*) FROM fragment_embeddings WHERE agent_id = ? AND model = ?", (agent, self.model))
        return int(row.fetchone()[0])

    def count_changes(self, agent: str, after: int, limit: int) -> int:
        row = (
            self._reader()
            .execute("SELECT COUNT(*) FROM (SELECT 1 FROM vector_changes WHERE agent_id = ? AND change > ? LIMIT ?)", (agent, after, limit))
            .fetchone()
        )
        return int(row[0])

    def changes(self, agent: str, after: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        cursor = self._reader().execute(
            "SELECT c.seq, e.vector FROM vector_changes c LEFT JOIN fragment_embeddings e"
            " ON e.seq = c.seq AND e.model = ? AND e.dim = ? WHERE c.agent_id = ? AND c.change > ?",
            (self.model, self.dimensions, agent, after),
        )
        while batch := cursor.fetchmany(BATCH):
            changed = np.array([r[0] for r in batch], dtype=np.uint64)
            present = [(r[0], r[1]) for r in batch if r[1] is not None]
            if present:
                keys, vectors = _batch(present)
            else:
                keys, vectors = np.empty(0, dtype=np.uint64), np.empty((0, self.dimensions), dtype=np.float32)
            yield changed, keys, vectors
