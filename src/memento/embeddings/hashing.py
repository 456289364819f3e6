"""A deterministic, offline embedder without a model, for unit tests.

Feature hashing ("the hashing trick") of lowercased word tokens and of the character
trigrams of each word, into signed buckets. Texts that share words or word pieces get a
higher cosine than unrelated texts; there is no notion of meaning beyond that. The hash
is blake2b, so vectors are identical across processes and machines (Python's ``hash()``
is salted per process and must not be used here).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy

from memento.embeddings.protocol import EmbeddingFailed

_WORD = re.compile(r"\w+", re.UNICODE)
_WORD_WEIGHT = 1.0
_TRIGRAM_WEIGHT = 0.5
_EMPTY_FEATURE = "\x00empty"


class HashEmbedder:
    """Feature-hashing embedder: deterministic, dependency-free, meaning-free."""

    def __init__(self, dimensions: int = 256) -> None:
        if dimensions < 8:
            raise ValueError("HashEmbedder needs at least 8 dimensions")
        self.dimensions = int(dimensions)
        self.name = f"hash:v1:{self.dimensions}"

    def _features(self, text: str) -> list[tuple[str, float]]:
        feats: list[tuple[str, float]] = []
        for word in _WORD.findall(text.lower()):
            feats.append(("w:" + word, _WORD_WEIGHT))
            padded = f"<{word}>"
            for i in range(len(padded) - 2):
                feats.append(("c:" + padded[i : i + 3], _TRIGRAM_WEIGHT))
        if not feats:
            feats.append((_EMPTY_FEATURE, 1.0))
        return feats

    def _vector(self, text: str) -> numpy.ndarray:
        if not isinstance(text, str):
            raise EmbeddingFailed(f"can only embed strings, got {type(text).__name__}")
        vec = numpy.zeros(self.dimensions, dtype=numpy.float64)
        for feature, weight in self._features(text):
            digest = hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8).digest()
            value = int.from_bytes(digest, "little")
            bucket = (value >> 1) % self.dimensions
            vec[bucket] += weight if value & 1 else -weight
        norm = numpy.linalg.norm(vec)
        if norm == 0.0:  # every feature cancelled out; fall back to the empty-text vector
            return self._vector("")
        return (vec / norm).astype(numpy.float32)

    def embed_passages(self, texts: Sequence[str]) -> numpy.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed_passages takes a sequence of strings, not a string")
        out = numpy.empty((len(texts), self.dimensions), dtype=numpy.float32)
        for i, text in enumerate(texts):
            out[i] = self._vector(text)
        return out

    def embed_query(self, text: str) -> numpy.ndarray:
        return self._vector(text)

    def __repr__(self) -> str:
        return f"HashEmbedder(dimensions={self.dimensions})"
