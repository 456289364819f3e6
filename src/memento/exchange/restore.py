"""Lossless import of the memento export format, version 2: every record written as it was (ids,
fields, access statistics, tiers, versions, links, the entity graph) through
RecordStore.restore_records, a batch per transaction; only vectors are the importing store's own.

The input is read twice, a line at a time: `check` validates every line (a bad one stops the
import naming it, before anything is written) and the trailer (a file cut short is refused);
`restore` then writes. Records whose id is already stored are skipped and reported, never
overwritten, so importing into a store that has some of them merges, and running an import again
after a failure resumes it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..access import writable_scope
from ..errors import Forbidden, InvalidArgument
from ..models import AgentScope, CallContext
from ..storage.protocol import RecordStore
from ..storage.records import ALREADY_PRESENT, ENTITIES, FRAGMENTS, RECORD_TABLES, RecordTable, RestoreSkip
from . import wire

if TYPE_CHECKING:
    from ..service import MemoryService

log = logging.getLogger(__name__)
BATCH = 500  # records per transaction
MAINTENANCE_SCOPE = "system"
MAX_SKIPS_LISTED = 1000  # a report lists this many skipped records, and counts the rest
Embed = Callable[[list[str]], list[np.ndarray | None]]
Progress = Callable[[int, int], None]  # (memories written or skipped, memories in the file)


class RestoreFormatError(InvalidArgument):
    """The input is not a valid version 2 export; names the line."""


@dataclass(frozen=True)
class Checked:
    """What `check` found: the header, and the records by kind."""

    header: dict[str, Any]
    counts: dict[str, int]
    agents: dict[str, int]  # memories per agent, as the file names them


@dataclass
class RestoreReport:
    """What an import restored and skipped."""

    read: dict[str, int] = field(default_factory=dict)
    restored: dict[str, int] = field(default_factory=dict)
    skipped: list[RestoreSkip] = field(default_factory=list)
    skipped_total: int = 0
    present: dict[str, int] = field(default_factory=dict)  # records skipped as already stored, by kind
    agents: dict[str, int] = field(default_factory=dict)  # memories restored per agent
    vectors: dict[str, int] = field(default_factory=dict)  # memories' vectors: kept (from the file), embedded, pending

    def take(self, skips: list[RestoreSkip]) -> None:
        self.skipped_total += len(skips)
        for s in skips:
            if s.reason == ALREADY_PRESENT:
                self.present[kind_of(s.table)] = self.present.get(kind_of(s.table), 0) + 1
        room = MAX_SKIPS_LISTED - len(self.skipped)
        self.skipped.extend(skips[: max(room, 0)])

    def as_dict(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "restored": self.restored,
            "skipped": self.skipped_total,
            "alreadyPresent": self.present,
            "skippedRecords": [{"kind": kind_of(s.table), "key": s.key, "reason": s.reason} for s in self.skipped],
            "agents": self.agents,
            "vectors": self.vectors,
        }


def kind_of(table: str) -> str:
    return next((t.kind for t in RECORD_TABLES if t.table == table), table)


def objects(lines: Iterable[str], name: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(name:line, object) of each non-blank line; a line that is not a JSON object is an error."""
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        where = f"{name}:{number}"
        try:
            item = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RestoreFormatError(f"{where}: not JSON ({exc.msg}); nothing imported") from None
        if not isinstance(item, dict):
            raise RestoreFormatError(f"{where}: expected a JSON object; nothing imported")
        yield where, item


def is_v2(header: object) -> bool:
    return isinstance(header, dict) and header.get("format") == wire.FORMAT and header.get("version") == wire.VERSION


def check(lines: Iterable[str], name: str, *, agent: str | None = None, allowed: str | None = None) -> Checked:
    """Validate a whole version 2 export without writing anything. `agent`: every record goes to
    this namespace; `allowed`: records must name this agent (Forbidden otherwise)."""
    header: dict[str, Any] | None = None
    counts: dict[str, int] = {}
    agents: dict[str, int] = {}
    trailer: dict[str, Any] | None = None
    for where, item in objects(lines, name):
        if header is None:
            if not is_v2(item):
                raise RestoreFormatError(f'{where}: the first line must be the header {{"format": "memento-export", "version": 2, ...}}')
            header = item
            continue
        if trailer is not None:
            raise RestoreFormatError(f"{where}: a record after the closing {wire.END!r} line")
        if item.get("kind") == wire.END:
            trailer = item
            continue
        spec, row = _decode(where, item)
        owner = str(row.get("agent_id") or "")
        if allowed is not None and agent is None and owner and owner != allowed:
            raise Forbidden(f"{where}: a record of agent {owner!r}; this credential imports only its own ({allowed!r}); nothing imported")
        counts[spec.kind] = counts.get(spec.kind, 0) + 1
        if spec is FRAGMENTS:
            counts["versions"] = counts.get("versions", 0) + len(row.get("versions") or [])  # type: ignore[arg-type]
            who = agent or owner
            agents[who] = agents.get(who, 0) + 1
    if header is None:
        raise RestoreFormatError(f"{name}: empty (no memento-export header); nothing imported")
    if trailer is None:
        raise RestoreFormatError(f"{name}: no closing {wire.END!r} line: the export was cut short; nothing imported")
    expected = trailer.get("counts")
    if not isinstance(expected, dict) or {k: v for k, v in expected.items() if v} != {k: v for k, v in counts.items() if v}:
        raise RestoreFormatError(f"{name}: the closing line counts {expected}, the file holds {counts}; nothing imported")
    return Checked(header, counts, agents)


def _decode(where: str, item: dict[str, Any]) -> tuple[RecordTable, dict[str, object]]:
    kind = item.get("kind")
    spec = wire.KINDS.get(str(kind))
    if spec is None:
        raise RestoreFormatError(f"{where}: 'kind' must be one of {', '.join(wire.KINDS)} or {wire.END}; not {kind!r}")
    try:
        return spec, wire.decode(spec, item)
    except wire.WireError as exc:
        raise RestoreFormatError(f"{where}: {exc}; nothing imported") from None


def restore(
    store: RecordStore,
    scope: AgentScope,
    lines: Iterable[str],
    name: str,
    *,
    embed: Embed | None = None,
    agent: str | None = None,
    total: int = 0,
    progress: Progress | None = None,
    erased: Callable[[str], set[str]] | None = None,
    model: tuple[str, int] | None = None,
    batch_size: int = BATCH,
) -> RestoreReport:
    """Write a checked export into `scope` (the maintenance scope keeps each record's agent;
    `agent` puts every record in that namespace), `batch_size` records per transaction. A
    fragment line's vector is kept when `model` (the store's model name and dimensions) computed
    it; the others are embedded by `embed`, or left pending for the embedding worker without it."""
    report = RestoreReport()
    batch: list[tuple[str, dict[str, object]]] = []
    done = 0
    gone: set[str] = set()  # ids of fragments whose text was erased here before
    tombstones: dict[str, set[str]] = {}

    def flush() -> None:
        nonlocal done
        if not batch:
            return
        for key, n in _embed(batch, embed, model).items():
            report.vectors[key] = report.vectors.get(key, 0) + n
        outcome = store.restore_records(scope, batch)
        for table, n in outcome.restored.items():
            report.restored[kind_of(table)] = report.restored.get(kind_of(table), 0) + n
        restored = set(outcome.fragment_ids)
        for table, row in batch:
            if table == FRAGMENTS.table and row["id"] in restored:
                owner = str(row["agent_id"])
                report.agents[owner] = report.agents.get(owner, 0) + 1
        report.take(outcome.skipped)
        done += sum(1 for table, _ in batch if table == FRAGMENTS.table)
        batch.clear()
        if progress is not None:
            progress(done, max(total, done))

    for where, item in objects(lines, name):
        if is_v2(item) or item.get("kind") == wire.END:
            continue
        spec, row = _decode(where, item)
        report.read[spec.kind] = report.read.get(spec.kind, 0) + 1
        if agent is not None and "agent_id" in row and (spec.owner is not None or spec is FRAGMENTS):
            row["agent_id"] = agent
        if erased is not None and _was_erased(spec, row, erased, gone, tombstones):
            report.take(
                [RestoreSkip(spec.table, str(row.get("id", "")), ERASED_BEFORE if spec is FRAGMENTS else f"{spec.kind} {ERASED_LINK}")]
            )
            continue
        batch.append((spec.table, row))
        if len(batch) >= batch_size:
            flush()
    flush()
    return report


ERASED_BEFORE = "its text was erased before in this namespace (forget mode=hard): not restored"
ERASED_LINK = "names a memory erased before (forget mode=hard): not restored"


def _was_erased(
    spec: RecordTable, row: dict[str, object], erased: Callable[[str], set[str]], gone: set[str], tombstones: dict[str, set[str]]
) -> bool:
    """Whether `row` is a memory whose text its namespace erased (docs/erasure.md), or names one."""
    if spec is FRAGMENTS:
        owner = str(row.get("agent_id", ""))
        if owner not in tombstones:
            tombstones[owner] = erased(owner)
        if row.get("content_hash") in tombstones[owner]:
            gone.add(str(row["id"]))
            return True
        return False
    return any(row.get(column) in gone for column in spec.fragments)


def _embed(batch: list[tuple[str, dict[str, object]]], embed: Embed | None, model: tuple[str, int] | None) -> dict[str, int]:
    """The importing store's own vectors: a fragment's of its content (the file's own when `model`
    computed it), an entity's of its name and description (None where the provider cannot answer
    or there is no `embed`: the embedding worker embeds them later). Counts the fragments' vectors
    kept, embedded and left pending."""
    counts = {"kept": 0, "embedded": 0, "pending": 0}
    texts: list[str] = []
    targets: list[tuple[dict[str, object], bool]] = []  # (row, is a fragment)
    for table, row in batch:
        if table == FRAGMENTS.table:
            carried = row.pop("embedding", None)
            made_by = row.pop("embedding_model", None)
            if isinstance(carried, np.ndarray) and model is not None and (made_by, len(carried)) == model:
                row["embedding"] = carried
                counts["kept"] += 1
            elif embed is None:
                counts["pending"] += 1
            else:
                texts.append(str(row["content"]))
                targets.append((row, True))
        elif table == ENTITIES.table and embed is not None:
            texts.append(f"{row['name']} {row['description']}".strip() if row.get("description") else str(row["name"]))
            targets.append((row, False))
    if texts and embed is not None:
        for (row, fragment), vector in zip(targets, embed(texts), strict=True):
            row["embedding"] = vector
            if fragment:
                counts["embedded" if vector is not None else "pending"] += 1
    return counts


def scope_of(service: MemoryService, ctx: CallContext, agent: str | None = None) -> tuple[AgentScope, str | None]:
    """The scope an import writes in, and the agent its records must name (None: any). `agent`
    (the operator's --agent) puts every record in that namespace; an agent credential restores
    its own records only (a read-only one nothing); the operator and admin credentials keep each
    record's agent."""
    if agent is not None:
        return AgentScope(agent), None
    if ctx.agent_id is None or AgentScope(ctx.agent_id).is_maintenance:
        if ctx.read_only:
            raise Forbidden("this credential is read-only")
        return AgentScope(MAINTENANCE_SCOPE), None
    scope = writable_scope(None, ctx, service.settings.shared_pool, pool=True)
    return scope, scope.agent_id


def model_of(service: MemoryService) -> tuple[str, int] | None:
    """The store's embedding model and dimensions: a file's vectors made by it are kept."""
    embedder = service.embedder
    return None if embedder is None else (embedder.name, embedder.dimensions)


def embedder_of(service: MemoryService) -> Embed | None:
    """The service's passage vectors in batches; None per text when the provider fails. A bulk
    import is no interactive write, so it embeds in batches as it goes; but after one failed batch
    (a hanging provider costs one timeout, not one per batch) it stores the rest without vectors,
    and the embedding worker embeds them afterwards (the caller sweeps)."""
    if service.embedder is None:
        return None
    failed = False

    def embed(texts: list[str]) -> list[np.ndarray | None]:
        nonlocal failed
        if failed:
            return [None] * len(texts)
        try:
            return list(service.vectors.passages(texts))
        except Exception as exc:  # noqa: BLE001 - any provider failure leaves the vectors pending
            failed = True
            log.warning("import: embedding failed (%s); the memories are stored now and embedded in the background", exc)
            return [None] * len(texts)

    return embed
