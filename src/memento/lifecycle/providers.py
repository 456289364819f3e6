"""Which judge the evaluator uses for an agent's memory (MEMENTO_EVALUATOR_PROVIDER).

`auto`: the operator's OpenAI-compatible model (MEMENTO_LLM_URL), else Gemini (GEMINI_API_KEY),
else the model of a connected MCP client of the agent's namespace that declared sampling, else
the heuristic. The other values name one provider; `heuristic` never calls a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import Unavailable
from ..models import Complete, Fragment
from ..settings import Settings
from .evaluator import ChooseJudge, Judge
from .judges import Judgement, ModelJudge, Neighbour
from .sampling import SamplingSessions

if TYPE_CHECKING:
    from ..llm.gemini import GeminiGenerate


def build_gemini(settings: Settings) -> GeminiGenerate | None:
    """The Gemini client when GEMINI_API_KEY is set."""
    if not settings.gemini_api_key:
        return None
    from ..llm.gemini import GeminiGenerate  # httpx only when Gemini is configured

    return GeminiGenerate(
        settings.gemini_url, model=settings.gemini_model, api_key=settings.gemini_api_key, timeout_s=settings.evaluator_timeout_s
    )


def _no_sampling(agent_id: str) -> Judge:
    def judge(memory: Fragment, neighbours: Sequence[Neighbour]) -> Judgement:
        raise Unavailable(f"no connected MCP client of namespace {agent_id!r} offers sampling now")

    return judge


def provider_chooser(settings: Settings, llm: Complete | None, gemini: Complete | None, sampling: SamplingSessions) -> ChooseJudge:
    """choose(agent_id) -> (provider name, model judge or None for the heuristic)."""
    mode = settings.evaluator_provider
    llm_judge = ModelJudge(llm, "llm") if llm is not None else None
    gemini_judge = ModelJudge(gemini, "gemini") if gemini is not None else None

    def choose(agent_id: str) -> tuple[str, Judge | None]:
        if mode == "heuristic":
            return "heuristic", None
        if mode in ("llm", "auto") and llm_judge is not None:
            return "llm", llm_judge
        if mode in ("gemini", "auto") and gemini_judge is not None:
            return "gemini", gemini_judge
        if mode in ("sampling", "auto"):
            lent = sampling.model_for(agent_id)
            if lent is not None:
                return "sampling", ModelJudge(lent, "sampling")
            if mode == "sampling":
                return "sampling", _no_sampling(agent_id)
        return "heuristic", None

    return choose
