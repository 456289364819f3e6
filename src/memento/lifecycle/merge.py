"""001 §6.2 cluster consolidation, one implementation for the `consolidate_memories` tool and the
pipeline's `merged` stage.

Clusters are found on the stored vectors (the current embedding model's; a memory without one
is skipped), never by embedding the texts again. A cluster's primary is the most confident, then
the oldest memory; the others — same agent, same type, the same numbers and names in the text, calibrated
similarity to the primary above the threshold — are absorbed: each one's text goes to the
primary's version trail, its tags, confidence, metadata and entity associations to the primary,
then it is deleted. Pinned, anchored, keyed (002) and working (session) memories are never absorbed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, cast

import numpy as np

from ..models import AgentScope, Fragment, FragmentType, RecordFields
from ..retrieval.search import calibrate
from ..storage.protocol import REINFORCEMENT, EntityStore, FragmentChanges, Store, VersionRecord

MAX_CONSOLIDATION = 5_000  # newest memories one consolidation compares
_BLOCK = 512  # rows of the similarity matrix computed at once (memory stays O(block · n))
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_NAME = re.compile(r"\b[A-Z][\w'-]*")
_WORD = re.compile(r"\b\w[\w'-]*")
# Capitalised words that name nobody (sentence openers): not a reason to keep two memories apart.
_OPENERS = frozenset(
    "a an the i we you he she it they this that these those my our your his her its their "
    "on in at to for of and but or if when then there here after before also note with without from by as so"
    " because while during today yesterday tomorrow yes no please now once since all some every each both how what"
    " why where who which do does did is are was were be can could should would will not never always only just"
    " first next last finally".split()
)


class MergeStore(Store, EntityStore, Protocol):
    """What merging needs of the store: every backend provides both (storage.protocol.AppStore)."""


def numbers(text: str) -> set[str]:
    """The numbers of a text: "3pm" and "4pm" are different facts, never merged."""
    return set(_NUMBER.findall(text))


def names(text: str) -> set[str]:
    """The capitalised words of a text that may name someone or something (openers apart), lower-cased."""
    return {w.lower() for w in _NAME.findall(text)} - _OPENERS


def names_apart(a: str, b: str) -> bool:
    """Whether one text names what the other never mentions ("Alice owns billing", "Bob owns
    billing": two facts, however close their vectors; "The staging database" and "Staging
    database" name nothing apart)."""
    words_a, words_b = {w.lower() for w in _WORD.findall(a)}, {w.lower() for w in _WORD.findall(b)}
    return bool(names(a) - words_b or names(b) - words_a)


@dataclass(frozen=True)
class Cluster:
    """A primary and the memories it would absorb, each with its calibrated similarity."""

    primary: Fragment
    members: tuple[tuple[Fragment, float], ...]

    @property
    def absorbed_ids(self) -> list[str]:
        return [f.id for f, _ in self.members]


def merge_into(
    store: Store, scope: AgentScope, old: Fragment, text: str, record: RecordFields, source: str | None, now: datetime, *, note: str
) -> Fragment:
    """Merge a memory's fields into `old` (001 §6.1): tags united, confidence max (and reinforced),
    metadata merged shallowly (new values win), the merged text archived in `old`'s versions."""
    store.add_version(
        scope,
        old.id,
        VersionRecord(
            content=text,
            topic=old.topic,
            keywords=tuple(old.keywords),
            type=old.type,
            importance=old.importance,
            amended_by=scope.agent_id,
            confidence=record.confidence,
            metadata=dict(record.metadata),
            tags=tuple(record.tags),
            note=note if source is None else f"{note} (source {source})",
        ),
        now,
    )
    tags = list(dict.fromkeys([*old.tags, *record.tags]))
    confidence = min(1.0, max(old.confidence, record.confidence, old.confidence + REINFORCEMENT))
    metadata = {**old.metadata, **record.metadata}
    return store.update(scope, old.id, FragmentChanges(tags=tuple(tags), confidence=confidence, metadata=metadata), scope.agent_id, now)


class Merger:
    """Finds and merges the clusters of a scope."""

    def __init__(self, store: MergeStore, baseline: Callable[[], float]) -> None:
        self.store = store
        self.baseline = baseline  # the embedding model's cosine baseline (retrieval.search.baseline_for)

    def clusters(self, scope: AgentScope, threshold: float) -> list[Cluster]:
        """The clusters among the scope's newest MAX_CONSOLIDATION memories with a stored vector.
        Only the memories with a neighbour above the threshold are loaded."""
        stored = self.store.recent_embeddings(scope, MAX_CONSOLIDATION)
        if len(stored) < 2:
            return []
        matrix = np.stack([v for _, v in stored]).astype(np.float32)
        matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        baseline = self.baseline()
        pairs = _neighbours(matrix, baseline + threshold * (1.0 - baseline))
        involved = [stored[i][0] for i in sorted(pairs)]
        loaded = {f.id: f for f in self.store.get_many(scope, involved) if scope.may_change(f)}
        fragments = {i: loaded[stored[i][0]] for i in pairs if stored[i][0] in loaded}
        order = sorted(fragments, key=lambda i: (-fragments[i].confidence, fragments[i].created_at, fragments[i].id))
        rank = {i: n for n, i in enumerate(order)}
        taken: set[int] = set()
        found: list[Cluster] = []
        for i in order:
            if i in taken:
                continue
            primary = fragments[i]
            digits = numbers(primary.detail or primary.content)
            members = [
                (j, calibrate(cosine, baseline))
                for j, cosine in sorted(((j, c) for j, c in pairs[i].items() if j in fragments), key=lambda item: rank[item[0]])
                if j not in taken and _absorbable(fragments[j], primary, digits) and calibrate(cosine, baseline) > threshold
            ]
            if members:
                taken.add(i)
                taken.update(j for j, _ in members)
                found.append(Cluster(primary, tuple((fragments[j], s) for j, s in members)))
        return found

    def merge(self, scope: AgentScope, cluster: Cluster, now: datetime) -> list[str]:
        """Absorb a cluster into its primary in one transaction; the ids deleted. The memories are
        read again inside it: one pinned, anchored, keyed, amended or gone since the cluster was
        found is left as it is (the next run judges it afresh); without its primary, nothing is."""
        with self.store.atomic():
            fresh = {f.id: f for f in self.store.get_many(scope, [cluster.primary.id, *cluster.absorbed_ids]) if scope.may_change(f)}
            primary = fresh.get(cluster.primary.id)
            if primary is None:
                return []
            members = [fresh[f.id] for f, _ in cluster.members if f.id in fresh and _unchanged(fresh[f.id], f)]
            if not members:
                return []
            for absorbed in members:
                # the absorbed memory's own trail first (what it absorbed or was before): no text is lost
                self._carry_trail(scope, absorbed, primary, now)
                record = RecordFields(tags=tuple(absorbed.tags), confidence=absorbed.confidence, metadata=dict(absorbed.metadata))
                text = absorbed.detail or absorbed.content
                primary = merge_into(self.store, scope, primary, text, record, absorbed.source, now, note=f"merged:{absorbed.id}")
                self.store.move_entity_links(scope, absorbed.id, primary.id, now)
            return self.store.delete(scope, [f.id for f in members])

    def _carry_trail(self, scope: AgentScope, absorbed: Fragment, primary: Fragment, now: datetime) -> None:
        """Copy the absorbed memory's version trail into the primary's (it is deleted with its memory)."""
        for v in self.store.versions(scope, absorbed.id):
            note = f"from {absorbed.id}" + (f": {v['note']}" if v.get("note") else "")
            tags, metadata, confidence = v.get("tags"), v.get("metadata"), v.get("confidence")
            version = VersionRecord(
                content=str(v["content"]),
                topic=str(v["topic"]),
                keywords=tuple(cast(Sequence[str], v.get("keywords") or ())),
                type=FragmentType(str(v["type"])),
                importance=float(cast(float, v["importance"])),
                amended_by=str(v.get("amended_by") or scope.agent_id),
                confidence=None if confidence is None else float(cast(float, confidence)),
                metadata=None if metadata is None else dict(cast(dict[str, object], metadata)),
                tags=None if tags is None else tuple(cast(Sequence[str], tags)),
                note=note,
            )
            self.store.add_version(scope, primary.id, version, now)

    def run(self, scope: AgentScope, threshold: float, now: datetime) -> list[str]:
        """Find and merge every cluster; the ids absorbed (deleted)."""
        return [fid for cluster in self.clusters(scope, threshold) for fid in self.merge(scope, cluster, now)]


def _unchanged(now: Fragment, then: Fragment) -> bool:
    """Whether a memory read again may still be absorbed as it was judged: the same text, and
    nothing since made it one that is never absorbed."""
    return (
        (now.content, now.detail) == (then.content, then.detail)
        and not (now.pinned or now.is_anchor)
        and now.memory_key is None
        and now.session_id is None
    )


def _absorbable(f: Fragment, primary: Fragment, digits: set[str]) -> bool:
    return (
        f.agent_id == primary.agent_id  # a whole-store run never moves one namespace's text into another
        and f.type is primary.type
        and not (f.pinned or f.is_anchor)
        and numbers(f.detail or f.content) == digits
        and not names_apart(f.detail or f.content, primary.detail or primary.content)
    )


def _neighbours(matrix: np.ndarray, floor: float) -> dict[int, dict[int, float]]:
    """{i: {j: cosine}} for every pair above `floor` (i != j), computed a block of rows at a time."""
    found: dict[int, dict[int, float]] = {}
    for start in range(0, len(matrix), _BLOCK):
        sims = matrix[start : start + _BLOCK] @ matrix.T
        rows, cols = np.nonzero(sims > floor)
        for r, c in zip(rows.tolist(), cols.tolist()):
            i = start + r
            if i != c:
                found.setdefault(i, {})[c] = float(sims[r, c])
    return found


def merged_ids(clusters: Sequence[Cluster]) -> list[str]:
    """The ids a list of clusters would absorb."""
    return [fid for c in clusters for fid in c.absorbed_ids]
