"""The contract every embedding provider fulfils.

Vectors are float32 and L2-normalised, so cosine similarity is a dot product. Each
provider has a stable ``name`` that is stored next to every vector it produced: a
vector is only ever compared with vectors of the same name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy

from memento.errors import Unavailable


class EmbeddingFailed(Unavailable):
    """The embedding provider could not embed the given text(s) right now."""


@runtime_checkable
class Embedder(Protocol):
    name: str
    """Stable identifier, e.g. ``local:multilingual-e5-small-q4``; stored with each vector."""

    dimensions: int
    """Length of every vector this embedder returns."""

    def embed_passages(self, texts: Sequence[str]) -> numpy.ndarray:
        """Embed texts to be searched: shape ``(len(texts), dimensions)``, float32, unit rows."""
        ...

    def embed_query(self, text: str) -> numpy.ndarray:
        """Embed a search query: shape ``(dimensions,)``, float32, unit length."""
        ...


def normalise_rows(matrix: numpy.ndarray) -> numpy.ndarray:
    """Return ``matrix`` as C-contiguous float32 with unit-length rows.

    Raises :class:`EmbeddingFailed` for non-finite values or all-zero rows, which can
    not be normalised and would poison similarity scores.
    """
    out = numpy.ascontiguousarray(matrix, dtype=numpy.float32)
    if out.ndim != 2:
        raise EmbeddingFailed(f"embedding provider returned an array of shape {out.shape}, expected (n, d)")
    if not numpy.all(numpy.isfinite(out)):
        raise EmbeddingFailed("embedding provider returned non-finite values")
    norms = numpy.linalg.norm(out, axis=1, keepdims=True)
    if out.shape[0] and float(norms.min()) <= 1e-12:
        raise EmbeddingFailed("embedding provider returned an all-zero vector")
    if out.shape[0]:
        out = out / norms
    return out.astype(numpy.float32, copy=False)
