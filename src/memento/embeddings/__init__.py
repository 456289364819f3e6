"""Text embedding providers: local (bundled e5-small), OpenAI-compatible HTTP, hashing (tests)."""

from typing import TYPE_CHECKING, Any

from memento.embeddings.factory import build_embedder
from memento.embeddings.hashing import HashEmbedder
from memento.embeddings.local import LocalE5Embedder
from memento.embeddings.protocol import Embedder, EmbeddingFailed

if TYPE_CHECKING:
    from memento.embeddings.openai import OpenAICompatibleEmbedder

__all__ = ["Embedder", "EmbeddingFailed", "HashEmbedder", "LocalE5Embedder", "OpenAICompatibleEmbedder", "build_embedder"]


def __getattr__(name: str) -> Any:
    """The OpenAI-compatible embedder is imported on first use: its HTTP client (httpx) costs
    start-up time that servers on the local model (stdio ones above all) need not pay."""
    if name == "OpenAICompatibleEmbedder":
        from memento.embeddings.openai import OpenAICompatibleEmbedder

        return OpenAICompatibleEmbedder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
