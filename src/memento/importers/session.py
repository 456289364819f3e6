"""A distilled session stored through the service: `reflect` for the summary, decisions,
errors and fixes, procedures and open questions; `remember` for the user's stated preferences.

Running it again for the same session adds nothing: every item is recognised by its content,
and a summary that grew (pre-compaction, then session end) replaces the session's earlier one in
place (`amend`, the old text archived as a version) instead of adding a second.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..models import AgentScope, AmendInput, CallContext, FragmentType, ReflectInput, RememberInput
from ..service import MemoryService
from .transcript import Distilled

SOURCE = "hook:session-end"


@dataclass(frozen=True)
class SessionReport:
    """How many memories the session gave, and how many of them were new."""

    marker: str
    topic: str
    memories: int
    created: int
    summary_updated: bool

    def as_dict(self) -> dict[str, object]:
        return {
            "session": self.marker,
            "topic": self.topic,
            "memories": self.memories,
            "created": self.created,
            "summaryUpdated": self.summary_updated,
        }


def remember_session(service: MemoryService, distilled: Distilled, ctx: CallContext, agent: str | None = None) -> SessionReport:
    """Store the session's memories in `agent`'s namespace (default: `default`)."""
    namespace = agent or "default"
    with service.store.atomic(), service.held_events():  # the whole session or none of it; announced once committed
        return _remember_session(service, distilled, ctx, namespace)


def _remember_session(service: MemoryService, distilled: Distilled, ctx: CallContext, namespace: str) -> SessionReport:
    updated = _update_summary(service, distilled, ctx, namespace)
    reflected = service.reflect(
        ReflectInput(
            summary=distilled.summary,
            decisions=distilled.decisions or None,
            errorsResolved=distilled.errors_resolved or None,
            newProcedures=distilled.procedures or None,
            openQuestions=distilled.open_questions or None,
            topic=distilled.topic,
            agentId=namespace,
        ),
        ctx,
    )
    created = sum(f.created for f in reflected.fragments)
    for text in distilled.preferences:
        stored = service.remember(
            RememberInput(content=text, topic=distilled.topic, type=FragmentType.PREFERENCE, source=SOURCE, agentId=namespace), ctx
        )
        created += stored.created
    return SessionReport(distilled.marker, distilled.topic, reflected.count + len(distilled.preferences), created, updated)


def _update_summary(service: MemoryService, distilled: Distilled, ctx: CallContext, agent: str) -> bool:
    """Rewrite this session's earlier summary when the new one differs; whether it did."""
    new = service.factory.clean_content(distilled.summary)
    earlier = [
        f
        for f in service.store.find_by_topic(AgentScope(agent), distilled.topic)
        if f.agent_id == agent and f.type is FragmentType.FACT and f.source == "reflect" and f.content.startswith(distilled.marker + " ")
    ]
    if not earlier or any(f.content == new for f in earlier):
        return False
    service.amend(AmendInput(id=earlier[0].id, content=distilled.summary, agentId=agent), ctx)
    return True
