"""Store parsed import records through the service, exactly as tool calls would.

`plan` validates everything first (every record as a `remember` input, every link's ends), so a
bad record stops the import before anything is stored. `write` then calls `remember` (with the
record's createdAt) and `link`: redaction, duplicate detection, embeddings and agent namespaces
apply as for any call, and importing the same input again stores nothing new.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic import ValidationError

from ..errors import MementoError
from ..fields import MAX_INPUT_CHARS, MAX_LIST_ITEMS
from ..graph_inputs import CreateEntitiesInput, CreateRelationInput, CreateRelationsInput, EntityInput
from ..models import DEFAULT_AGENT, AgentScope, CallContext, LinkInput, RecordInput, RelationType, RememberInput
from ..service import MemoryService
from ..storage.protocol import EntityStore
from .records import ImportEntityLink, ImportFormatError, ImportLink, ImportRecord, Parsed, Skipped

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
    """A validated import: the remember inputs in order, the links between their keys, and seed
    001's entity graph (entities, relations, associations) per agent."""

    parsed: Parsed
    memories: list[PlannedMemory]
    links: list[PlannedLink]
    entities: list[tuple[str, EntityInput]] = field(default_factory=list)
    relations: list[tuple[str, CreateRelationInput]] = field(default_factory=list)
    entity_links: list[tuple[str, ImportEntityLink]] = field(default_factory=list)


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
    entities: int = 0  # entities created (an existing name is merged, not counted)
    relations: int = 0  # relations created (an existing one is updated, not counted)
    entity_links: int = 0  # associations added
    skipped: list[Skipped] = field(default_factory=list)
    agents: dict[str, int] = field(default_factory=dict)  # memories per namespace
    vectors: dict[str, int] = field(default_factory=dict)  # Memento's export: vectors kept, embedded, pending

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
            "entities": self.entities,
            "relations": self.relations,
            "entityLinks": self.entity_links,
            "skipped": [{"where": s.where, "reason": s.reason} for s in self.skipped],
            "agents": self.agents,
            **({"vectors": self.vectors} if self.vectors else {}),
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
    graph = _plan_graph(parsed, agent, seen, errors)
    if errors:
        shown = errors[:MAX_ERRORS_SHOWN] + ([f"... and {len(errors) - MAX_ERRORS_SHOWN} more"] if len(errors) > MAX_ERRORS_SHOWN else [])
        raise ImportFormatError("invalid input, nothing imported:\n  " + "\n  ".join(shown))
    return Plan(parsed, memories, links, *graph)


def _plan_graph(
    parsed: Parsed, agent: str | None, seen: dict[str, ImportRecord], errors: list[str]
) -> tuple[list[tuple[str, EntityInput]], list[tuple[str, CreateRelationInput]], list[tuple[str, ImportEntityLink]]]:
    """Validate the entity graph as the entity tools would; an association must name an entity of
    the input and one of its memories."""
    entities: list[tuple[str, EntityInput]] = []
    names: set[tuple[str, str]] = set()
    for e in parsed.entities:
        owner = agent or e.agent or DEFAULT_AGENT
        try:
            given: dict[str, Any] = {
                "name": e.name,
                "entity_type": e.entity_type,
                "description": e.description,
                "metadata": e.metadata or None,
            }
            entities.append((owner, EntityInput.model_validate(given)))
            names.add((owner, e.name.strip().lower()))
        except ValidationError as exc:
            errors.extend(f"{e.where}: {_field(x)}: {x['msg']}" for x in exc.errors())
    relations: list[tuple[str, CreateRelationInput]] = []
    for r in parsed.relations:
        owner = agent or r.agent or DEFAULT_AGENT
        fields: dict[str, Any] = {"source": r.source, "target": r.target, "relation_type": r.relation_type, "strength": r.strength}
        fields |= {"confidence": r.confidence, "context": r.context, "metadata": r.metadata or None}
        try:
            relations.append((owner, CreateRelationInput.model_validate(fields)))
        except ValidationError as exc:
            errors.extend(f"{r.where}: {_field(x)}: {x['msg']}" for x in exc.errors())
    links: list[tuple[str, ImportEntityLink]] = []
    for link in parsed.entity_links:
        owner = agent or link.agent or DEFAULT_AGENT
        if (owner, link.entity.strip().lower()) not in names:
            errors.append(f"{link.where}: association with entity {link.entity!r}, which is not in the input")
        elif link.record_key not in seen:
            errors.append(f"{link.where}: association with {link.record_key!r}, which is not in the input")
        elif not 0.0 <= link.relevance <= 1.0:
            errors.append(f"{link.where}: relevance must be between 0 and 1")
        else:
            links.append((owner, link))
    return entities, relations, links


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
    if payload["agentId"] != DEFAULT_AGENT and fields.get("privacyScope") in ("team", "public"):
        # shared scopes live in the pool (docs/privacy.md §5): in an agent's namespace it is private
        fields["privacyScope"] = "private"
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
    tombstones: dict[str, set[str]] = {}
    for done, item in enumerate(planned.memories, start=1):
        owner = service._writable(item.inp.agentId, ctx, pool=True).agent_id
        if owner not in tombstones:
            tombstones[owner] = service.erasure_store.erased_hashes(owner)
        if tombstones[owner] and service.stored_hash(item.inp.content) in tombstones[owner]:
            report.skipped.append(Skipped(item.record.where, "erased before in this namespace (forget mode=hard): not brought back"))
            continue
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
    _write_graph(service, planned, ids, ctx, report)
    return report


def _chunks(items: list[Any]) -> list[list[Any]]:
    return [items[i : i + MAX_LIST_ITEMS] for i in range(0, len(items), MAX_LIST_ITEMS)]


def _write_graph(service: MemoryService, planned: Plan, ids: dict[str, str], ctx: CallContext, report: ImportReport) -> None:
    """Entities, relations and associations through the entity face's own operations (names are the
    identity: an entity the store has already is merged, a relation already there updated)."""
    owners = list(
        dict.fromkeys([a for a, _ in planned.entities] + [a for a, _ in planned.relations] + [a for a, _ in planned.entity_links])
    )
    for owner in owners:
        mine = [e for a, e in planned.entities if a == owner]
        for chunk in _chunks(mine):
            report.entities += service.entities.create_entities(CreateEntitiesInput(entities=chunk, agent_id=owner), ctx).created
        rels = [r for a, r in planned.relations if a == owner]
        for chunk in _chunks(rels):
            report.relations += service.entities.create_relations(CreateRelationsInput(relations=chunk, agent_id=owner), ctx).created
        links = [link for a, link in planned.entity_links if a == owner and link.record_key in ids]
        if links:
            scope = service._writable(owner, ctx, pool=True)
            graph = cast(EntityStore, service.store)
            found = {e.name.lower(): e.id for e in graph.entities_named(scope, list({link.entity for link in links}))}
            triples = [(found[link.entity.strip().lower()], ids[link.record_key], link.relevance) for link in links]
            report.entity_links += graph.link_entities(scope, triples, service.clock())


def _link(service: MemoryService, planned: PlannedLink, ids: dict[str, str], ctx: CallContext, report: ImportReport) -> None:
    link = planned.link
    if link.from_key not in ids or link.to_key not in ids:
        report.skipped.append(Skipped(link.where, "link to a memory that was erased before (not imported)"))
        return
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
