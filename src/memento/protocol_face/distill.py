"""Seed 003's distillation (lifecycle step 1): a transcript in, its novel facts, decisions,
observations and instructions out, each stored as a 003 memory tagged `source:distill`.

Candidates come from a language model when there is one (the operator's MEMENTO_LLM_*, else the
MCP client's sampling; `face.language_model`), else, or when the model fails or answers badly, from
the heuristic sieve (distill_heuristic.py). Each candidate is then checked against what the
caller's namespace already stores and against the earlier candidates of the same call: the same
text (its content hash), or a text that says the same thing (`same_meaning`), is skipped and
reported. The novel ones are stored in one transaction through the engine's write path
(redaction, dedupe, embedding) as memories.py stores a 003 memory (its kind, its tags, its first
tag its topic), or only returned on a dry run. docs/protocol.md "Distill".
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from ..analysis import content_hash, query_terms
from ..errors import Unavailable
from ..fields import MAX_LIST_ITEMS
from ..models import AgentScope, CallContext, ChangeEvent, Fragment, RecordFields
from ..retrieval.search import baseline_for, calibrate
from ..storage.protocol import SearchFilter
from .distill_heuristic import Candidate, extract
from .distill_llm import InvalidAnswer, llm_extract
from .distill_models import DistilledMemory, DistillInput, DistillResult, Method, SkippedCandidate
from .memories import DEFAULT_TOPIC
from .memory_models import KIND_OF

if TYPE_CHECKING:
    from . import ProtocolFace

log = logging.getLogger(__name__)

SOURCE_TAG = "source:distill"
SOURCE = "distill"
# When two texts say the same thing, on the calibrated 0-1 scale of retrieval/search.py (bundled
# e5: raw cosine 0.95 and 0.975). Calibrated on bench/data/distill/pairs.json (bench/distill.py
# --pairs): related sentences about the same thing reach raw 0.94-0.97 with e5, so a similar
# vector alone is not enough below SURE; NEAR also needs most content words shared.
NEAR = 0.83
SURE = 0.915
NEAR_OVERLAP = 0.6  # shared terms / terms of the shorter text, with NEAR
LEXICAL_ONLY = 0.9  # the same without vectors (keyword-only mode), for texts of MIN_TERMS or more
MIN_TERMS = 3
CHECKED = 5  # stored memories compared with each candidate (the nearest by vector and by text)
NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")


@dataclass
class _Text:
    """A candidate as it would be stored, with what comparing it needs."""

    candidate: Candidate
    stored: str  # redacted, as the store keeps it
    digest: str
    vector: np.ndarray | None


def numbers(text: str) -> frozenset[str]:
    return frozenset(NUMBER.findall(text))


def term_overlap(a: str, b: str) -> tuple[float, int]:
    """Shared terms / terms of the shorter text, and that shorter text's term count."""
    ta, tb = set(query_terms(a)), set(query_terms(b))
    shorter = min(len(ta), len(tb))
    return (len(ta & tb) / shorter if shorter else 0.0), shorter


def same_meaning(a: str, b: str, cosine: float | None, baseline: float) -> float | None:
    """The calibrated similarity of two texts when they say the same thing, else None. Differing
    numbers ("port 5432" / "port 5433") always make different facts."""
    if numbers(a) != numbers(b):
        return None
    overlap, shorter = term_overlap(a, b)
    if cosine is None:
        return overlap if shorter >= MIN_TERMS and overlap >= LEXICAL_ONLY else None
    similarity = calibrate(cosine, baseline)
    return similarity if similarity >= SURE or (similarity >= NEAR and overlap >= NEAR_OVERLAP) else None


class Distiller:
    """`memento_extract` / `POST /v1/distill` over the face's service."""

    def __init__(self, face: ProtocolFace) -> None:
        self.face = face

    @property
    def _baseline(self) -> float:
        service = self.face.service
        return baseline_for(service.store.embedding_model, service.settings.similarity_baseline)

    def extract(self, inp: DistillInput, ctx: CallContext) -> DistillResult:
        """Distill the conversation into the caller's namespace (nothing stored on a dry run)."""
        scope = self.face.read_scope(ctx) if inp.dry_run else self.face.write_scope(ctx)
        candidates, method, fallback = self.candidates(inp, ctx)
        novel, skipped = self.novel(scope, [self._text(c) for c in candidates])
        extra = tuple(inp.tags or ())
        if inp.dry_run:
            memories = [DistilledMemory(id=None, content=t.stored, type=t.candidate.type, tags=_tags(extra, t.candidate)) for t in novel]
        else:
            memories, late = self._store(scope, ctx, novel, extra)
            skipped += late
        return DistillResult(method=method, fallback=fallback, dry_run=inp.dry_run, count=len(memories), memories=memories, skipped=skipped)

    def candidates(self, inp: DistillInput, ctx: CallContext) -> tuple[list[Candidate], Method, str | None]:
        """The candidates of a transcript, the method that found them, and why a model's answer was not used."""
        turns = inp.turns()
        model = self.face.language_model(ctx)
        if model is None:
            return extract(turns, inp.max_memories), "heuristic", None
        method: Method = "llm" if self.face.llm is not None else "sampling"
        try:
            return llm_extract(model, turns, inp.max_memories), method, None
        except (Unavailable, InvalidAnswer) as exc:
            log.info("distill: the %s answer was not used (%s); heuristic instead", method, type(exc).__name__)
            message = exc.message if isinstance(exc, Unavailable) else str(exc)
            return extract(turns, inp.max_memories), "heuristic", f"{method}: {message}"

    def _text(self, candidate: Candidate) -> _Text:
        service = self.face.service
        stored = service.factory.clean_detail(candidate.content) or service.factory.clean_content(candidate.content)
        return _Text(candidate, stored, content_hash(stored), service.embed_within(stored))  # late: compared by words

    def novel(self, scope: AgentScope, texts: list[_Text]) -> tuple[list[_Text], list[SkippedCandidate]]:
        """The texts nothing stored (nor an earlier text of the batch) says yet, and the skipped ones."""
        kept: list[_Text] = []
        skipped: list[SkippedCandidate] = []
        for text in texts:
            earlier = next((similar for k in kept if (similar := self._same(text, k.stored, k.digest, k.vector)) is not None), None)
            if earlier is not None:
                skipped.append(_skip(text.candidate, "batch", None, earlier))
                continue
            stored = self._stored_duplicate(scope, text)
            if stored is not None:
                fragment, similarity = stored
                reason = "exact" if fragment.content_hash == text.digest else "near"
                skipped.append(_skip(text.candidate, reason, fragment.id, similarity))
                continue
            kept.append(text)
        return kept, skipped

    def _same(self, text: _Text, other: str, other_digest: str, other_vector: np.ndarray | None) -> float | None:
        if text.digest == other_digest:
            return 1.0
        cosine = float(text.vector @ other_vector) if text.vector is not None and other_vector is not None else None
        return same_meaning(text.stored, other, cosine, self._baseline)

    def _stored_duplicate(self, scope: AgentScope, text: _Text) -> tuple[Fragment, float] | None:
        """A memory of the namespace (never the shared pool) that says what `text` says."""
        store = self.face.service.store
        own = SearchFilter(owner=scope.agent_id)
        cosines = {h.id: h.score for h in store.vector_search(scope, text.vector, own, CHECKED)} if text.vector is not None else {}
        terms = query_terms(text.stored)
        lexical = [h.id for h in store.text_search(scope, terms, own, CHECKED)] if terms else []
        ids = list(dict.fromkeys([*cosines, *lexical]))
        best: tuple[Fragment, float] | None = None
        for fragment in store.get_many(scope, ids):
            if fragment.agent_id != scope.agent_id:
                continue
            if fragment.content_hash == text.digest:
                return fragment, 1.0
            similar = same_meaning(text.stored, fragment.detail or fragment.content, cosines.get(fragment.id), self._baseline)
            if similar is not None and (best is None or similar > best[1]):
                best = (fragment, similar)
        return best

    def _store(
        self, scope: AgentScope, ctx: CallContext, texts: list[_Text], extra: tuple[str, ...]
    ) -> tuple[list[DistilledMemory], list[SkippedCandidate]]:
        """Store the novel texts in one transaction (all or none); a text the store finds already
        there (written since it was checked) is reported as skipped."""
        service = self.face.service
        news = []
        for text in texts:  # redacted and analysed outside the transaction (embedded after it)
            tags = service.factory.clean_tags(_tags(extra, text.candidate))
            record = RecordFields(tags=tags)
            topic = tags[0] if tags else DEFAULT_TOPIC
            new = service._prepare(
                scope, ctx, content=text.candidate.content, topic=topic, type_=KIND_OF[text.candidate.type], source=SOURCE, record=record
            )
            news.append(replace(new, embedding=text.vector))  # the vector checked with, if it came in time
        with service.store.atomic():
            inserted = [service.store.insert(scope, new) for new in news]
        memories: list[DistilledMemory] = []
        late: list[SkippedCandidate] = []
        for text, (fragment, created) in zip(texts, inserted):
            if not created:
                late.append(_skip(text.candidate, "exact", fragment.id, 1.0))
                continue
            service._emit(ChangeEvent("created", fragment.agent_id, (fragment.id,), (fragment.topic,)))
            memories.append(DistilledMemory(id=fragment.id, content=text.stored, type=text.candidate.type, tags=list(fragment.tags)))
        return memories, late


def _tags(extra: tuple[str, ...], candidate: Candidate) -> list[str]:
    """The tags a distilled memory gets: the caller's, the model's, and source:distill."""
    return list(dict.fromkeys([*extra, *candidate.tags, SOURCE_TAG]))[:MAX_LIST_ITEMS]


def _skip(candidate: Candidate, reason: str, duplicate_of: str | None, similarity: float | None) -> SkippedCandidate:
    return SkippedCandidate.model_validate(
        {
            "content": candidate.content,
            "type": candidate.type,
            "reason": reason,
            "duplicate_of": duplicate_of,
            "similarity": None if similarity is None else round(similarity, 3),
        }
    )
