"""Memento's own export, version 2: restored as it was (memento.exchange.restore), not through
`remember` — ids, every field, access statistics, tiers, versions, keys, links and the entity
graph are kept; vectors are the importing store's own. docs/export.md."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import numpy as np

from ..exchange.restore import Embed, Progress, RestoreReport, check, is_v2, kind_of, restore
from ..models import AgentScope, CallContext
from ..service import MemoryService
from ..storage.protocol import RecordStore
from ..storage.records import ALREADY_PRESENT
from .records import Skipped
from .writer import ImportReport

log = logging.getLogger(__name__)
MAINTENANCE_SCOPE = "system"


def is_v2_file(path: Path) -> bool:
    """Whether `path` opens with a version 2 memento-export header."""
    with path.open(encoding="utf-8") as f:
        for text in f:
            if text.strip():
                try:
                    return is_v2(json.loads(text))
                except json.JSONDecodeError:
                    return False
    return False


def _lines(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8") as f:
        yield from f


def embedder(service: MemoryService) -> Embed | None:
    """The service's passage vectors in batches; None per text when the provider fails (the
    consolidation embeds those later)."""
    if service.embedder is None:
        return None

    def embed(texts: list[str]) -> list[np.ndarray | None]:
        try:
            return list(service.vectors.passages(texts))
        except Exception as exc:  # noqa: BLE001 - any provider failure leaves the vectors pending
            log.warning("import: embedding failed (%s); those memories are embedded later", exc)
            return [None] * len(texts)

    return embed


def scope_of(agent: str | None, ctx: CallContext) -> tuple[AgentScope, str | None]:
    """The scope an import writes in, and the agent its records must name (None: any). `agent`
    puts every record in that namespace; an agent credential restores its own records only; the
    operator's command line keeps each record's agent."""
    if agent is not None:
        return AgentScope(agent), None
    if ctx.agent_id is not None and not AgentScope(ctx.agent_id).is_maintenance:
        return AgentScope(ctx.agent_id), ctx.agent_id
    return AgentScope(MAINTENANCE_SCOPE), None


def import_v2(
    service: MemoryService, path: Path, *, agent: str | None, dry: bool, ctx: CallContext, progress: Progress | None
) -> ImportReport:
    """Check the whole file, then restore it a batch per transaction."""
    scope, allowed = scope_of(agent, ctx)
    checked = check(_lines(path), str(path), agent=agent, allowed=allowed)
    memories = checked.counts.get("fragment", 0)
    if dry:
        return ImportReport("memento", str(path), True, memories, memories, agents=checked.agents)
    store = cast(RecordStore, service.store)  # every backend is an AppStore (storage/protocol.py)
    done = restore(store, scope, _lines(path), str(path), embed=embedder(service), agent=agent, total=memories, progress=progress)
    return report_of(done, str(path))


def report_of(done: RestoreReport, source: str) -> ImportReport:
    """The import report of a restore: memories already stored count as already known."""
    others = [Skipped(f"{kind_of(s.table)} {s.key}", s.reason) for s in done.skipped if s.reason != ALREADY_PRESENT]
    hidden = done.skipped_total - len(done.skipped)
    if hidden:
        others.append(Skipped("…", f"{hidden} more records skipped (not listed)"))
    return ImportReport(
        format="memento",
        source=source,
        dry_run=False,
        read=done.read.get("fragment", 0),
        memories=done.read.get("fragment", 0),
        stored=done.restored.get("fragment", 0),
        already_known=done.present.get("fragment", 0),
        links=done.restored.get("link", 0),
        links_known=done.present.get("link", 0),
        entities=done.restored.get("entity", 0),
        relations=done.restored.get("relation", 0),
        entity_links=done.restored.get("entityLink", 0),
        skipped=others,
        agents=done.agents,
    )
