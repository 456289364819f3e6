"""`memento export`: every live memory of the chosen agents, and their links, in the memento
export format (JSON Lines, version 1; `memento import` reads it).

Line 1 is a header; then one object per line, every fragment and then every link. A fragment
is its result form (`FragmentView.dump()`: the camelCase names every face shows) plus `kind`,
`agentId` and `sessionId`; a link is `{kind, agentId, from, to, relation}`, owned by the agent
of its `from` fragment. Soft-deleted and expired memories are left out (no store read returns
them); working memory only with `include_sessions`. Reads go through the store protocol with the
agents' own scopes. The body is gathered first (in anonymous temporary files), so the header
can name the agents found, and a file target appears complete or not at all.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, cast

from .. import __version__
from ..errors import Conflict, InvalidArgument, NotFound
from ..graph import Entity, Relation
from ..models import MAINTENANCE_AGENTS, AgentScope, Fragment, RelationType
from ..results import FragmentView
from ..storage.protocol import EntityStore, SearchFilter, Store

FORMAT = "memento-export"
VERSION = 1
PAGE = 500
GRAPH_PAGE = 100  # entities per page (list_entities takes at most 100)
EVERY_LINK = 2**31 - 1  # `neighbours` takes a limit; an export wants them all
MAINTENANCE_SCOPE = "system"  # sees every namespace (models.MAINTENANCE_AGENTS)

Progress = Callable[[int, int], None]  # (fragments written, fragments in all)


@dataclass(frozen=True)
class ExportReport:
    """What an export wrote."""

    path: str  # "-" for stdout
    agents: list[str]
    fragments: int
    links: int
    entities: int = 0

    def as_dict(self) -> dict[str, object]:
        return {"path": self.path, "agents": self.agents, "fragments": self.fragments, "links": self.links, "entities": self.entities}


def fragment_record(f: Fragment) -> dict[str, Any]:
    """One fragment line: kind, agentId, the result form's fields, sessionId."""
    return {"kind": "fragment", "agentId": f.agent_id, **FragmentView.of(f).dump(), "sessionId": f.session_id}


def link_record(agent_id: str, from_id: str, to_id: str, relation: RelationType) -> dict[str, Any]:
    return {"kind": "link", "agentId": agent_id, "from": from_id, "to": to_id, "relation": relation.value}


def header(agents: list[str], now: datetime) -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "exportedAt": now.isoformat(), "memento": __version__, "agents": agents}


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def _sources(agents: list[str] | None) -> list[tuple[AgentScope, str | None]]:
    """(scope, the agent whose rows are kept) per pass: one pass over every namespace, or one per
    chosen agent in its own scope (which also sees the shared pool: those rows are the pool's)."""
    if agents is None:
        return [(AgentScope(MAINTENANCE_SCOPE), None)]
    reserved = sorted(set(agents) & MAINTENANCE_AGENTS)
    if reserved:
        raise InvalidArgument(f"{', '.join(reserved)} is the maintenance scope, not an agent; omit --agent to export every agent")
    return [(AgentScope(a), a) for a in dict.fromkeys(agents)]


def export(
    store: Store,
    out: IO[str],
    *,
    agents: list[str] | None = None,
    include_sessions: bool = False,
    progress: Progress | None = None,
    now: datetime | None = None,
) -> ExportReport:
    """Write the export of `agents` (None: every agent) to `out`; nothing is written to `out`
    before every memory has been read."""
    store.flush_access()  # settled access counts, as the views show them
    filt = SearchFilter(all_sessions=include_sessions)
    sources = _sources(agents)
    chosen = None if agents is None else set(agents)
    total = sum(store.count(scope, filt) for scope, _ in sources)
    found: set[str] = set()
    exported_ids: set[str] = set()
    fragments = links = 0
    with _spool() as body, _spool() as edges:
        for scope, keep in sources:
            for page in _pages(store, scope, filt):
                kept = [f for f in page if keep is None or f.agent_id == keep]
                for f in kept:
                    body.write(_line(fragment_record(f)))
                    found.add(f.agent_id)
                    exported_ids.add(f.id)
                owners = {f.id: f.agent_id for f in kept}
                for link, end in store.neighbours(scope, list(owners), list(RelationType), EVERY_LINK):
                    # An edge belongs to its source and is listed once, from there; only between
                    # exported memories (the row whose other end is the edge's target).
                    if link.from_id in owners and end.id == link.to_id and _exported(end, chosen, include_sessions):
                        edges.write(_line(link_record(owners[link.from_id], link.from_id, link.to_id, link.relation_type)))
                        links += 1
                fragments += len(kept)
                if progress is not None:
                    progress(fragments, max(total, fragments))
        if progress is not None:
            progress(fragments, fragments)  # a chosen agent's scope counted the shared pool too
        listed = sorted(found) if agents is None else list(dict.fromkeys(agents))
        with _spool() as graph:
            entities = _write_graph(cast(EntityStore, store), sources, graph, exported_ids)
            out.write(_line(header(listed, now or datetime.now(UTC))))
            for part in (body, edges, graph):
                part.seek(0)
                shutil.copyfileobj(part, out)
    out.flush()
    return ExportReport("-", listed, fragments, links, entities)


def _write_graph(store: EntityStore, sources: list[tuple[AgentScope, str | None]], out: IO[str], fragments: set[str]) -> int:
    """Seed 001's entity graph of the exported agents: entities, relations (by entity name, the
    identity an import keeps) and the associations with exported memories; how many entities."""
    count = 0
    for scope, keep in sources:
        offset = 0
        while True:
            page, total = store.list_entities(scope, entity_type=None, name_contains=None, limit=GRAPH_PAGE, offset=offset)
            if not page:
                break
            offset += len(page)
            mine = {e.id: e for e in page if keep is None or e.agent_id == keep}
            for e in mine.values():
                out.write(_line(entity_record(e)))
            for rel in store.relations_of(scope, list(mine), 0.0):
                if rel.source_id in mine:  # listed once, from its source
                    out.write(_line(relation_record(rel)))
            for link in store.entity_links(scope, entity_ids=list(mine)):
                if link.fragment_id in fragments:
                    owner = mine[link.entity_id]
                    record = {"kind": "entityLink", "agentId": owner.agent_id, "entity": owner.name, "fragment": link.fragment_id}
                    out.write(_line({**record, "relevance": link.relevance}))
            count += len(mine)
            if offset >= total:
                break
    return count


def entity_record(e: Entity) -> dict[str, Any]:
    return {
        "kind": "entity",
        "agentId": e.agent_id,
        "id": e.id,
        "name": e.name,
        "entityType": e.entity_type,
        "description": e.description,
        "metadata": e.metadata,
    }


def relation_record(r: Relation) -> dict[str, Any]:
    return {
        "kind": "relation",
        "agentId": r.agent_id,
        "id": r.id,
        "source": r.source_name,
        "target": r.target_name,
        "relationType": r.relation_type,
        "strength": r.strength,
        "confidence": r.confidence,
        "context": r.context,
        "metadata": r.metadata,
    }


def _exported(f: Fragment, chosen: set[str] | None, include_sessions: bool) -> bool:
    """Whether the export holds `f` (a live fragment some pass can see)."""
    return (chosen is None or f.agent_id in chosen) and (include_sessions or f.session_id is None)


def _pages(store: Store, scope: AgentScope, filt: SearchFilter) -> Iterator[list[Fragment]]:
    """Every visible fragment, newest first, a keyset page at a time."""
    before: int | None = None
    while True:
        page = store.page(scope, filt, before, PAGE)
        if not page:
            return
        yield page
        before = page[-1].seq


@contextmanager
def _spool() -> Iterator[IO[str]]:
    with tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n") as f:
        yield f


def export_to_file(target: Path, write: Callable[[IO[str]], ExportReport], *, overwrite: bool = False) -> ExportReport:
    """Run `write` into a temporary file beside `target` and move it into place when complete:
    `target` never holds half an export. Refuses an existing `target` unless `overwrite`."""
    if target.is_dir():
        raise InvalidArgument(f"{target} is a directory; give a file name")
    if not target.parent.is_dir():
        raise NotFound(f"folder {target.parent} does not exist")
    if target.exists() and not overwrite:
        raise Conflict(f"{target} already exists; nothing written (--force replaces it)")
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.partial")
    try:
        with tmp.open("w", encoding="utf-8", newline="\n") as f:
            report = write(f)
            f.flush()
            os.fsync(f.fileno())
        if overwrite:
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)  # refuses an existing name: no check-then-write race
            except FileExistsError as exc:
                raise Conflict(f"{target} already exists; nothing written (--force replaces it)") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return ExportReport(str(target), report.agents, report.fragments, report.links, report.entities)
