"""Language models the server may ask for a draft (distillation, crystallization, the lifecycle's
evaluator): an OpenAI-compatible chat-completions client configured by MEMENTO_LLM_*.

Every model is a `memento.models.Complete`: complete(prompt, system, max_tokens) -> text, raising
`memento.errors.Unavailable` when it cannot answer. Callers keep a deterministic fallback.
docs/llm.md.
"""

from memento.llm.chat import ChatCompletions
from memento.llm.factory import build_llm
from memento.llm.gemini import GeminiGenerate

__all__ = ["ChatCompletions", "GeminiGenerate", "build_llm"]
