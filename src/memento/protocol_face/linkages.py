"""Seed 003's linkages: a memory's references to other memories, working-memory items and files
(the store's `memory_linkages`, migration 0015), and the breadth-first walk over them that
GET /v1/memories/{id}/graph and memento_memory_graph answer.

A linkage to a memory is also a `related` link between the two fragments (unless they are linked
already), so 000's link-following (recall's linked neighbours, the fragment graph) sees it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, cast

from ..errors import InvalidArgument, NotFound
from ..models import AgentScope, Fragment, RelationType
from ..storage.protocol import Linkage, LinkageStore, NewLinkage
from .memory_models import GraphEdge, GraphNode, LinkageInput, LinkageOut, MemoryGraph, MemoryGraphInput, protocol_type

if TYPE_CHECKING:
    from ..service import MemoryService

MAX_GRAPH_NODES = 100  # a walk stops adding nodes here (and says it was truncated)
DEFAULT_LABEL = {"memory": "related", "item": "related", "file": "source"}  # an edge without a label of its own


def new_linkages(given: Sequence[LinkageInput] | None) -> list[NewLinkage]:
    """The linkages to store, in the order given, each once."""
    found = [NewLinkage(g.type, g.target, g.label) for g in given or ()]
    return list(dict.fromkeys(found))


def linkage_out(linkage: Linkage) -> LinkageOut:
    """A stored linkage as 003 writes it: `{type, id | path, label}`."""
    if linkage.kind == "file":
        return LinkageOut(type="file", path=linkage.target, label=linkage.label)
    return LinkageOut(type=linkage.kind, id=linkage.target, label=linkage.label)


def node_key(linkage: Linkage) -> str:
    """The graph node a linkage points at: a memory by its id; an item or a file by kind and reference."""
    return linkage.target if linkage.kind == "memory" else f"{linkage.kind}:{linkage.target}"


class Linkages:
    """Linkages over the service's store (every backend is a LinkageStore, storage/protocol.py)."""

    def __init__(self, service: MemoryService) -> None:
        self.service = service

    @property
    def store(self) -> LinkageStore:
        return cast(LinkageStore, self.service.store)

    def check(self, scope: AgentScope, linkages: Sequence[NewLinkage]) -> None:
        """Refuse, before anything is written, a memory target the scope does not see (the store
        checks again inside the write's transaction)."""
        wanted = list(dict.fromkeys(n.target for n in linkages if n.kind == "memory"))
        seen = {f.id for f in self.service.store.get_many(scope, wanted)}
        missing = [t for t in wanted if t not in seen]
        if missing:
            raise NotFound(
                f"linkages: memory {missing[0]!r} not found (a linkage must name a memory you can see); nothing stored", missing=missing
            )

    def attach(self, scope: AgentScope, memory: Fragment, linkages: Sequence[NewLinkage], now: datetime) -> list[Linkage]:
        """Store `linkages` on `memory` and a `related` link for each memory target that is not
        linked from it yet; inside the caller's transaction. The memory's linkages afterwards."""
        if any(n.kind == "memory" and n.target == memory.id for n in linkages):
            raise InvalidArgument(f"linkages: memory {memory.id} cannot link to itself; nothing stored")
        stored = self.store.add_linkages(scope, memory.id, linkages, now)
        targets = [n.target for n in linkages if n.kind == "memory"]
        if targets:
            linked = {
                link.to_id
                for link, _ in self.service.store.neighbours(scope, [memory.id], tuple(RelationType), 10 * len(targets) + 50)
                if link.from_id == memory.id
            }
            for target in targets:
                if target not in linked:  # an existing link keeps its own relation (add_link would retype it)
                    self.service.store.add_link(scope, memory.id, target, RelationType.RELATED, now)
        return stored

    def of(self, scope: AgentScope, ids: Sequence[str]) -> dict[str, list[LinkageOut]]:
        return {fid: [linkage_out(x) for x in found] for fid, found in self.store.linkages_of(scope, ids).items()}

    # ------------------------------------------------------------ the walk

    def graph(self, scope: AgentScope, root: Fragment, inp: MemoryGraphInput) -> MemoryGraph:
        """Breadth first from `root` along linkages in both directions (a memory's own, and the
        memory linkages naming it), `inp.depth` hops, at most MAX_GRAPH_NODES nodes. Items and
        files are end points; only memories the scope sees (its own linkages) are walked."""
        nodes: dict[str, GraphNode] = {root.id: memory_node(root, 0)}
        edges: dict[tuple[str, str, str], GraphEdge] = {}
        frontier = [root.id]
        truncated = False
        for depth in range(1, inp.depth + 1):
            found: list[Linkage] = [x for held in self.store.linkages_of(scope, frontier).values() for x in held]
            found += self.store.linkages_to(scope, frontier)
            reached: list[str] = []
            for linkage in found:
                target = node_key(linkage)
                label = linkage.label or DEFAULT_LABEL[linkage.kind]
                edges.setdefault((linkage.fragment_id, target, label), GraphEdge(from_=linkage.fragment_id, to=target, label=label))
                for end in (linkage.fragment_id, target):
                    if end in nodes or end in reached:
                        continue
                    if len(nodes) + len(reached) >= MAX_GRAPH_NODES:
                        truncated = True
                        continue
                    if end == target and linkage.kind != "memory":
                        nodes[end] = GraphNode(id=end, kind=linkage.kind, depth=depth, ref=linkage.target)
                    else:
                        reached.append(end)
            fragments = self.service.store.get_many(scope, reached)
            nodes.update({f.id: memory_node(f, depth) for f in fragments})
            frontier = [f.id for f in fragments]
            if not frontier:
                break
        kept = [e for e in edges.values() if e.from_ in nodes and e.to in nodes]
        return MemoryGraph(root=root.id, depth=inp.depth, nodes=list(nodes.values()), edges=kept, truncated=truncated)


def memory_node(f: Fragment, depth: int) -> GraphNode:
    return GraphNode(id=f.id, kind="memory", depth=depth, content=f.detail or f.content, type=protocol_type(f.type), tags=list(f.tags))
