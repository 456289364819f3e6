"""Choose the language model from the settings (MEMENTO_LLM_URL and friends)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memento.settings import Settings

if TYPE_CHECKING:
    from memento.llm.chat import ChatCompletions


def build_llm(settings: Settings) -> ChatCompletions | None:
    """The configured model, or None when MEMENTO_LLM_URL is empty (the default: no LLM)."""
    if not settings.llm_url:
        return None
    from memento.llm.chat import ChatCompletions  # httpx only when a model is configured

    return ChatCompletions(settings.llm_url, model=settings.llm_model, api_key=settings.llm_api_key, timeout_s=settings.llm_timeout_s)
