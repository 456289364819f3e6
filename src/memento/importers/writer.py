"""Store parsed import records through the service, exactly as tool calls would.

`plan` validates everything first (every record as a `remember` input, every link's ends), so a
bad record stops the import before anything is stored. `write` then calls `remember` (with the
record's createdAt) and `link`: redaction, duplicate detection, embeddings and agent namespaces
apply as for any call, and importing the same input again stores nothing new.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ..errors import MementoError
from ..fields import MAX_INPUT_CHARS
from ..models import DEFAULT_AGENT, AgentScope, CallContext, LinkInput, RecordInput, RelationType, RememberInput
from ..service import MemoryService
from .records import ImportFormatError, ImportLink, ImportRecord, Parsed, Skipped

MAX_TOPIC_CHARS = 200
MAX_ERRORS_SHOWN = 10
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class PlannedMemory:
    record: ImportRecord
    inp: RememberInput


@dataclass(frozen=True)
class PlannedLink:
    link: ImportLink
    agent: str


@dataclass(frozen=True)
class Plan:
    """A validated import: the remember inputs in order and the links between their keys."""

    parsed: Parsed
    memories: list[PlannedMemory]
    links: list[PlannedLink]


@dataclass
class ImportReport:
    """What an import read, stored, found already known, linked and skipped."""

    format: str
    source: str
    dry_run: bool
    read: int
    memories: int
    stored: int = 0
    already_known: int = 0
    links: int = 0
    links_known: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    agents: dict[str, int] = field(default_factory=dict)  # memories per namespace

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON (the CLI's --json output)."""
        return {
            "format": self.format,
            "source": self.source,
            "dryRun": self.dry_run,
            "read": self.read,
            "memories": self.memories,
            "stored": self.stored,
            "alreadyKnown": self.already_known,
            "links": self.links,
            "linksKnown": self.links_known,
            "skipped": [{"where": s.where, "reason": s.reason} for s in self.skipped],
            "agents": self.agents,
        }


def plan(parsed: Parsed, agent: str | None = None) -> Plan:
    """Validate every record and link; any problem is one ImportFormatError naming each place
    (up to ten), and nothing has been stored."""
    errors: list[str] = []
    memories: list[PlannedMemory] = []
    seen: dict[str, ImportRecord] = {}
    for record in parsed.records:
        if record.key in seen:
            errors.append(f"{record.where}: the same item appears twice (first at {seen[record.key].where})")
            continue
        seen[record.key] = record
        try:
            memories.append(PlannedMemory(record, RememberInput.model_validate(_payload(record, agent))))
        except ValidationError as exc:
            errors += [f"{record.where}: {_field(e)}: {e['msg']}" for e in exc.errors()]
    links: list[PlannedLink] = []
    for link in parsed.links:
        missing = [k for k in (link.from_key, link.to_key) if k not in seen]
        if missing:
            errors.append(f"{link.where}: link to {', '.join(missing)}, which is not in the input")
        elif link.from_key != link.to_key:
            links.append(PlannedLink(link, agent or link.agent or seen[link.from_key].agent or DEFAULT_AGENT))
    if errors:
        shown = errors[:MAX_ERRORS_SHOWN] + ([f"... and {len(errors) - MAX_ERRORS_SHOWN} more"] if len(errors) > MAX_ERRORS_SHOWN else [])
        raise ImportFormatError("invalid input, nothing imported:\n  " + "\n  ".join(shown))
    return Plan(parsed, memories, links)


RECORD_KEYS = frozenset(RecordInput.model_fields)  # confidence, context, metadata, expiresAt, pinned, ...


def _payload(record: ImportRecord, agent: str | None) -> dict[str, Any]:
    """The `remember` arguments of a record (by wire name): the shared-record fields in `record`.
    Content longer than 300 characters goes whole: the store keeps it as the memory's detail."""
    payload: dict[str, Any] = {
        "content": record.content[:MAX_INPUT_CHARS],
        "topic": record.topic.strip()[:MAX_TOPIC_CHARS] or "import",
        "type": record.type.value,
        "agentId": agent or record.agent or DEFAULT_AGENT,
        **{k: v for k, v in record.extra.items() if k not in RECORD_KEYS},
    }
    optional = {"keywords": list(record.keywords), "tags": list(record.tags), "createdAt": record.created_at, "source": record.source}
    payload.update({k: v for k, v in optional.items() if v})
    fields = {k: v for k, v in record.extra.items() if k in RECORD_KEYS}
    fields.update({k: v for k, v in {"metadata": record.metadata, "context": record.context}.items() if v})
    if fields:
        payload["record"] = fields
    return payload


def _field(error: Any) -> str:
    return ".".join(str(part) for part in error["loc"]) or "record"


def write(service: MemoryService, planned: Plan, ctx: CallContext, progress: Progress | None = None) -> ImportReport:
    """Store a validated plan; counts in the report. A failure part-way (the database, say) names
    the record and how far it got; importing again resumes, as stored memories are recognised."""
    report = _report(planned, dry_run=False)
    total = len(planned.memories) + len(planned.links)
    ids: dict[str, str] = {}
    for done, item in enumerate(planned.memories, start=1):
        try:
            result = service.remember(item.inp, ctx, fragment_id=item.record.keep_id)
        except MementoError as exc:
            raise type(exc)(f"{item.record.where}: {exc.message} ({report.stored} stored before it; importing again resumes)") from exc
        ids[item.record.key] = result.id
        report.stored += result.created
        report.already_known += not result.created
        if progress:
            progress(done, total)
    for done, planned_link in enumerate(planned.links, start=len(planned.memories) + 1):
        _link(service, planned_link, ids, ctx, report)
        if progress:
            progress(done, total)
    return report


def _link(service: MemoryService, planned: PlannedLink, ids: dict[str, str], ctx: CallContext, report: ImportReport) -> None:
    link = planned.link
    source, target = ids[link.from_key], ids[link.to_key]
    if source == target:
        report.skipped.append(Skipped(link.where, "link between two items that are the same memory (identical content)"))
        return
    if _linked(service, planned.agent, source, target, link.relation):
        report.links_known += 1
        return
    try:
        service.link(LinkInput(fromId=source, toId=target, relationType=link.relation, agentId=planned.agent), ctx)
    except MementoError as exc:
        raise type(exc)(f"{link.where}: {exc.message} (every memory is stored; importing again adds the missing links)") from exc
    report.links += 1


def _linked(service: MemoryService, agent: str, source: str, target: str, relation: RelationType) -> bool:
    """Whether the edge exists already (link would only rewrite it)."""
    found = service.store.neighbours(AgentScope(agent), [source], [relation], 10_000)
    return any(edge.from_id == source and edge.to_id == target for edge, _ in found)


def dry_run(planned: Plan) -> ImportReport:
    """The report of a validated plan that stores nothing."""
    return _report(planned, dry_run=True)


def _report(planned: Plan, *, dry_run: bool) -> ImportReport:
    agents: dict[str, int] = {}
    for item in planned.memories:
        agents[item.inp.agentId or DEFAULT_AGENT] = agents.get(item.inp.agentId or DEFAULT_AGENT, 0) + 1
    return ImportReport(
        format=planned.parsed.format,
        source="",
        dry_run=dry_run,
        read=planned.parsed.read,
        memories=len(planned.memories),
        skipped=list(planned.parsed.skipped),
        agents=agents,
    )
