"""Text embedding providers: local (bundled e5-small), OpenAI-compatible HTTP, hashing (tests)."""

from memento.embeddings.factory import build_embedder
from memento.embeddings.hashing import HashEmbedder
from memento.embeddings.local import LocalE5Embedder
from memento.embeddings.openai import OpenAICompatibleEmbedder
from memento.embeddings.protocol import Embedder, EmbeddingFailed

__all__ = ["Embedder", "EmbeddingFailed", "HashEmbedder", "LocalE5Embedder", "OpenAICompatibleEmbedder", "build_embedder"]
