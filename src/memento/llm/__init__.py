"""Language models the server may ask for a draft (distillation, crystallization, the lifecycle's
evaluator): an OpenAI-compatible chat-completions client configured by MEMENTO_LLM_*.

Every model is a `memento.models.Complete`: complete(prompt, system, max_tokens) -> text, raising
`memento.errors.Unavailable` when it cannot answer. Callers keep a deterministic fallback.
docs/llm.md.

The clients (and httpx under them) are imported on first use: a server with no model configured,
the default, does not pay their import at start-up.
"""

from typing import TYPE_CHECKING, Any

from memento.llm.factory import build_llm

if TYPE_CHECKING:
    from memento.llm.chat import ChatCompletions
    from memento.llm.gemini import GeminiGenerate

__all__ = ["ChatCompletions", "GeminiGenerate", "build_llm"]


def __getattr__(name: str) -> Any:
    """`ChatCompletions` and `GeminiGenerate`, imported when first asked for."""
    if name == "ChatCompletions":
        from memento.llm.chat import ChatCompletions

        return ChatCompletions
    if name == "GeminiGenerate":
        from memento.llm.gemini import GeminiGenerate

        return GeminiGenerate
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
