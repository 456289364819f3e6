"""Sleep consolidation (004 §4.3, "fast episodic → slow semantic integration"): recent episodic
memories are clustered by meaning, each cluster is checked for consistency, and a consistent one
becomes one semantic memory stating what its episodes share, linked to each of them by
`derived_from`.

- Candidates: a namespace's own live episodic memories created within the window, with a vector,
  not yet integrated (no memory is `derived_from` them, whether that memory is live or
  soft-deleted: a semantic memory someone forgot is not made again). Keyed memories stay apart.
- Clusters: in creation order, each episode not yet taken gathers the untaken ones whose
  calibrated similarity to it (retrieval/search.calibrate, the scale of 001's
  consolidate_memories) reaches the threshold; a cluster needs `min_cluster` episodes.
- Consistency: a cluster with a `contradicts` link inside, or two episodes that contradict each
  other (sleep_text.conflicting_pairs: negation or differing numbers), is not integrated; each
  such pair not linked yet gets a `contradicts` link (never a deletion).
- The text: a language model's statement when one is available (sleep_text.drafted), else the
  sentences the cluster agrees on (sleep_text.extractive); with neither, nothing is integrated.
- Writes: the semantic memory and its links in one transaction per cluster, in the episodes'
  namespace. The episodes are not changed (pinned and anchored ones included); they age out by
  their own retention. Never mixes namespaces.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import numpy as np

from ..errors import Conflict
from ..factory import FragmentFactory, new_fragment_id
from ..models import AgentScope, Complete, Draft, Fragment, FragmentType, MemorySystem, PrivacyScope, RecordFields, RelationType
from ..retrieval.search import calibrate
from ..storage.protocol import NewFragment, ReviewStore, SearchFilter, Store
from .sleep_text import conflicting_pairs, drafted, extractive

SOURCE = "sleep"
TAG = "source:sleep"
MAX_EPISODES = 2000  # candidates read per run (the newest first)
MAX_LINKS = 10_000
PRIVACY_ORDER = (PrivacyScope.PRIVATE, PrivacyScope.TEAM, PrivacyScope.PUBLIC)


@dataclass(frozen=True)
class SleepPolicy:
    """The settings of the stage (MEMENTO_SLEEP_*); `window` None: the stage is off."""

    window: timedelta | None = timedelta(days=7)
    similarity: float = 0.8
    min_cluster: int = 2
    baseline: float = 0.0  # the embedding model's cosine of unrelated texts (calibrate)


@dataclass
class SleepCounts:
    integrated: int = 0  # semantic memories made (one per integrated cluster)
    contradictions: int = 0  # contradicts links added between episodes of a cluster


class Sleep:
    """The `sleep_consolidated` stage over the store."""

    def __init__(
        self,
        store: Store,
        reviews: ReviewStore,
        factory: FragmentFactory,
        policy: SleepPolicy,
        model: Callable[[], Complete | None] = lambda: None,
    ) -> None:
        self.store = store
        self.reviews = reviews
        self.factory = factory
        self.policy = policy
        self.model = model

    def run(self, scope: AgentScope, now: datetime, *, use_model: bool = True) -> dict[str, int]:
        """Integrate the scope's namespaces (each apart); the counts as result fields.
        `use_model` False (a dry run): the extractive statement, no language model asked."""
        counts = SleepCounts()
        if self.policy.window is not None:
            for agent, episodes in self._candidates(scope, now).items():
                self._namespace(AgentScope(agent), episodes, now, counts, use_model)
        return {"sleep_consolidated": counts.integrated, "sleep_contradictions": counts.contradictions}

    def _candidates(self, scope: AgentScope, now: datetime) -> dict[str, list[tuple[Fragment, np.ndarray]]]:
        assert self.policy.window is not None
        filt = SearchFilter(
            memory_system=MemorySystem.EPISODIC,
            created_after=now - self.policy.window,
            owner=None if scope.is_maintenance else scope.agent_id,
        )
        found = [f for f in self.store.recent(scope, filt, MAX_EPISODES) if f.memory_key is None and f.session_id is None]
        done = self.reviews.derived_sources(scope, [f.id for f in found])
        fresh = [f for f in found if f.id not in done]
        vectors = self.store.embeddings_of(scope, [f.id for f in fresh])
        grouped: dict[str, list[tuple[Fragment, np.ndarray]]] = {}
        for fragment in sorted(fresh, key=lambda f: (f.created_at, f.seq or 0, f.id)):
            if fragment.id in vectors:
                grouped.setdefault(fragment.agent_id, []).append((fragment, vectors[fragment.id]))
        return grouped

    def _namespace(
        self, scope: AgentScope, episodes: list[tuple[Fragment, np.ndarray]], now: datetime, counts: SleepCounts, use_model: bool
    ) -> None:
        for members in self._clusters(episodes):
            if len(members) < self.policy.min_cluster:
                continue
            conflicts = self._conflicts(scope, members)
            if conflicts is not None:
                counts.contradictions += self._link_conflicts(scope, conflicts, now)
                continue
            if self._integrate(scope, members, now, use_model):
                counts.integrated += 1

    def _clusters(self, episodes: list[tuple[Fragment, np.ndarray]]) -> list[list[Fragment]]:
        if len(episodes) < 2:
            return []
        matrix = np.stack([_unit(v) for _, v in episodes])
        sims = matrix @ matrix.T
        taken: set[int] = set()
        clusters = []
        for i in range(len(episodes)):
            if i in taken:
                continue
            members = [j for j in range(i, len(episodes)) if j not in taken and (j == i or self._close(float(sims[i, j])))]
            if len(members) > 1:
                taken.update(members)
                clusters.append([episodes[j][0] for j in members])
        return clusters

    def _close(self, cosine: float) -> bool:
        return calibrate(cosine, self.policy.baseline) >= self.policy.similarity

    def _conflicts(self, scope: AgentScope, members: list[Fragment]) -> list[tuple[Fragment, Fragment]] | None:
        """The contradicting pairs of the cluster (linked already or found in the text); None when it is consistent."""
        ids = {m.id for m in members}
        linked = [
            link for link, _ in self.store.neighbours(scope, sorted(ids), (RelationType.CONTRADICTS,), MAX_LINKS) if link.to_id in ids
        ]
        found = conflicting_pairs(members)
        return found if linked or found else None

    def _link_conflicts(self, scope: AgentScope, pairs: list[tuple[Fragment, Fragment]], now: datetime) -> int:
        """A `contradicts` link for each pair with no link either way yet (one never replaces another relation)."""
        ids = sorted({f.id for pair in pairs for f in pair})
        linked = {frozenset((link.from_id, link.to_id)) for link, _ in self.store.neighbours(scope, ids, tuple(RelationType), MAX_LINKS)}
        added = 0
        with self.store.atomic():
            for earlier, later in pairs:
                if frozenset((earlier.id, later.id)) not in linked:
                    added += int(self.store.add_link(scope, later.id, earlier.id, RelationType.CONTRADICTS, now))
                    linked.add(frozenset((earlier.id, later.id)))
        return added

    def _integrate(self, scope: AgentScope, members: list[Fragment], now: datetime, use_model: bool = True) -> bool:
        model = self.model() if use_model else None
        text, method = (drafted(model, members), "llm") if model is not None else (None, "")
        if text is None:
            text, method = extractive(members), "extractive"
        if text is None:
            return False
        record = RecordFields(
            tags=self.factory.clean_tags([TAG, *_shared_tags(members)]),
            memory_system=MemorySystem.SEMANTIC,
            privacy_scope=_narrowest(members),
            origin_trace={"stage": "sleep_consolidated", "method": method, "derivedFrom": [m.id for m in members]},
        )
        draft = self.factory.draft(
            content=text,
            topic=_topic(members),
            type_=FragmentType.FACT,
            created_at=now,
            importance=max(m.importance for m in members),
            source=SOURCE,
            record=record,
        )
        # Its id follows from its sources: a dry run reports the very id the real run then makes.
        source_key = "\n".join([scope.agent_id, *sorted(m.id for m in members)])
        draft = replace(draft, id="frag-" + hashlib.sha256(source_key.encode()).hexdigest()[:16])
        try:
            self._store_integration(scope, draft, members, now)
        except Conflict:  # that id is taken (an earlier integration, since forgotten): a fresh one
            self._store_integration(scope, replace(draft, id=new_fragment_id()), members, now)
        return True

    def _store_integration(self, scope: AgentScope, draft: Draft, members: list[Fragment], now: datetime) -> None:
        with self.store.atomic():  # the memory and every link, or nothing
            semantic, _ = self.store.insert(scope, NewFragment(draft, scope.agent_id))
            for member in members:
                self.store.add_link(scope, semantic.id, member.id, RelationType.DERIVED_FROM, now)


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


def _topic(members: Sequence[Fragment]) -> str:
    """The topic most episodes share (the earliest one's among equals)."""
    topics = [m.topic for m in members]
    return max(dict.fromkeys(topics), key=topics.count)


def _shared_tags(members: Sequence[Fragment]) -> list[str]:
    common = set(members[0].tags).intersection(*(m.tags for m in members[1:]))
    return [t for t in members[0].tags if t in common]


def _narrowest(members: Sequence[Fragment]) -> PrivacyScope:
    """The semantic memory is shown no wider than its most private episode."""
    return min((m.privacy_scope for m in members), key=PRIVACY_ORDER.index)
