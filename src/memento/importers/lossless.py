"""Memento's own export, version 2: restored as it was (memento.exchange.restore), not through
`remember` — ids, every field, access statistics, tiers, versions, keys, links and the entity
graph are kept; vectors are the importing store's own. docs/export.md."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import cast

from ..exchange.restore import Progress, RestoreReport, check, embedder_of, is_v2, kind_of, model_of, restore, scope_of
from ..models import CallContext
from ..service import MemoryService
from ..storage.protocol import RecordStore
from ..storage.records import ALREADY_PRESENT
from .records import Skipped
from .writer import ImportReport


def is_v2_file(path: Path) -> bool:
    """Whether `path` opens with a version 2 memento-export header (its first line read, up to 64 KiB)."""
    with path.open("rb") as f:
        while raw := f.readline(1 << 16):
            if raw.strip():
                try:
                    return is_v2(json.loads(raw))
                except ValueError:  # not JSON, not UTF-8 (another format: the other readers say which)
                    return False
    return False


def _lines(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8") as f:
        yield from f


def import_v2(
    service: MemoryService,
    path: Path,
    *,
    agent: str | None,
    dry: bool,
    ctx: CallContext,
    progress: Progress | None,
    defer_embedding: bool = False,
) -> ImportReport:
    """Check the whole file, then restore it a batch per transaction. Vectors the file carries
    from the store's own model are kept; the other memories are embedded as they are written,
    or (`defer_embedding`) stored without a vector for the embedding worker."""
    scope, allowed = scope_of(service, ctx, agent)
    checked = check(_lines(path), str(path), agent=agent, allowed=allowed)
    memories = checked.counts.get("fragment", 0)
    if dry:
        return ImportReport("memento", str(path), True, memories, memories, agents=checked.agents)
    store = cast(RecordStore, service.store)  # every backend is an AppStore (storage/protocol.py)
    if progress is not None:
        progress(0, memories)
    done = restore(
        store,
        scope,
        _lines(path),
        str(path),
        embed=None if defer_embedding else embedder_of(service),
        model=model_of(service),
        agent=agent,
        total=memories,
        progress=progress,
        erased=service.erasure_store.erased_hashes,
    )
    service.outbox.sweep()  # rows the provider did not embed during the import: the worker's now
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
        vectors=done.vectors,
    )
