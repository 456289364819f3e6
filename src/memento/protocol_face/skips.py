"""Seed 003's skip list: what the agent should not do, mention or suggest for now, why, and until
when. Every entry expires (a date means through the end of that day, UTC; at most a year
ahead); an expired entry never matches and is never listed. A message matches an entry by its
words or by its meaning (docs/protocol.md "Skip list"):

* words: every content word of the entry's item (stop words dropped, English stemmed, Korean
  particles stripped, as memento.analysis does) appears in the message, or every content word
  of the message appears in the item (a short query such as "aurora");
* meaning: the relative similarity of the message and the entry ("item. reason") under the
  server's embedder reaches a threshold: their cosine minus half the sum of each one's mean
  cosine with a fixed set of ordinary sentences (`BACKGROUND`). The bundled model puts nearly
  every pair of texts between 0.8 and 0.9; measuring above that background separates related
  pairs from unrelated ones much better than a raw cosine (bench/skip_meaning.py). The
  threshold is calibrated for the bundled local models; with another embedder only a configured
  MEMENTO_SKIP_MEANING_THRESHOLD turns meaning on.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections import OrderedDict
from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING, Annotated, Literal, cast

import numpy as np
from pydantic import Field, Strict, StringConstraints

from ..analysis import STOPWORDS, is_hangul, stem, strip_particle, words
from ..embeddings.local import VARIANTS
from ..errors import InvalidArgument, NotFound
from ..fields import OperationInput
from ..graph_results import SeedResult
from ..models import CallContext
from ..results import Omitted
from ..storage.protocol import NewSkip, SkipStore, StoredSkip

if TYPE_CHECKING:
    from . import ProtocolFace

log = logging.getLogger(__name__)

MAX_ITEM_CHARS = 500
MAX_REASON_CHARS = 2000
MAX_QUERY_CHARS = 20_000
MAX_AHEAD = timedelta(days=365)
CALIBRATED_THRESHOLD = 0.045  # bench/skip_meaning.py: no false match on its two sets, ~80% of paraphrases found
CALIBRATED_MODELS = frozenset(VARIANTS.values())
VECTOR_CACHE = 1024  # entry vectors computed at check time (an entry stored without one, or under another model)
NOT_ON_LIST = "not on the skip list"

# Ordinary requests, English and Korean: what "unrelated" looks like to the embedder.
BACKGROUND = (
    "Hello, how are you?",
    "Please help me with a task.",
    "What should I do next?",
    "Tell me something interesting.",
    "I need to work on the project today.",
    "Can you write some code?",
    "Let's plan the week.",
    "Summarize this document.",
    "안녕하세요, 도와주세요.",
    "오늘 할 일을 알려줘.",
    "Thanks, that works.",
    "Let me think about it.",
)

Item = Annotated[str, Strict(), StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_ITEM_CHARS)]
Reason = Annotated[str, Strict(), StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_REASON_CHARS)]


class SkipAddInput(OperationInput):
    """memento_skip_add: an entry with a required expiry."""

    item: Item = Field(description="What to skip (not do, mention or suggest).")
    reason: Reason = Field(description="Why it should be skipped.")
    expires: Annotated[str, Strict(), StringConstraints(strip_whitespace=True, min_length=1, max_length=64)] = Field(
        description="When the skip ends: an ISO date (through the end of that day, UTC) or date-time; in the future, at most a year ahead."
    )


class SkipCheckInput(OperationInput):
    """memento_skip_check: does a topic or message touch the skip list?"""

    query: Annotated[str, Strict(), StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_QUERY_CHARS)] = Field(
        description="What to check against the skip list: a topic or a whole message."
    )


class SkipListInput(OperationInput):
    """memento_skip_list takes no parameters."""


class SkipRemoveInput(OperationInput):
    """memento_skip_remove: an entry's id."""

    id: Annotated[str, Strict(), StringConstraints(strip_whitespace=True, min_length=1, max_length=64)] = Field(
        description="Skip entry ID to remove."
    )


class SkipEntry(SeedResult):
    """One skip-list entry."""

    id: str
    item: str
    reason: str
    expires: str = Field(description="When it stops applying (ISO 8601, UTC).")
    created_at: str


class SkipMatch(SeedResult):
    """An unexpired entry a message touches, and how it matched."""

    id: str
    item: str
    reason: str
    expires: str
    match: Literal["words", "meaning"]
    similarity: float | None = Omitted(description="With match=meaning: the relative similarity that reached the threshold.")


class SkipCheckResult(SeedResult):
    query: str
    on_skip_list: bool
    matches: list[SkipMatch]
    message: str = Field(description="What the agent should do: skip (with the reasons), or proceed.")


class SkipListResult(SeedResult):
    entries: list[SkipEntry]
    total: int


class SkipRemoved(SeedResult):
    id: str
    removed: bool


def parse_expiry(value: str, now: datetime) -> datetime:
    """When an entry expires: a date is the end of that day (UTC), a date-time without a zone is
    UTC. InvalidArgument for anything else, a time not after `now`, or one more than a year ahead."""
    text = value.strip()
    try:
        if not any(mark in text for mark in "T :"):  # a date alone
            at = datetime.combine(date.fromisoformat(text), time.max, tzinfo=UTC)
        else:
            parsed = datetime.fromisoformat(text)
            at = parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
    except ValueError:
        raise InvalidArgument(f"expires: {value!r} is not an ISO date or date-time (e.g. 2026-03-01 or 2026-03-01T18:00:00Z)") from None
    if at <= now:
        raise InvalidArgument(f"expires: {value!r} is in the past; a skip must end in the future. Nothing stored")
    if at > now + MAX_AHEAD:
        raise InvalidArgument(f"expires: {value!r} is more than a year ahead; a skip is temporary by design. Nothing stored")
    return at.astimezone(UTC)


def content_terms(text: str) -> list[str]:
    """The words of `text` that carry content: stop words dropped, English stemmed, a Korean
    particle stripped."""
    out: list[str] = []
    for word in words(text):
        if word in STOPWORDS:
            continue
        term = strip_particle(word) if is_hangul(word) else stem(word)
        if term and term not in STOPWORDS:
            out.append(term)
    return list(dict.fromkeys(out))


def _covered(needles: Sequence[str], hay: Sequence[str]) -> bool:
    """Every needle is among `hay` (a Korean needle of two or more syllables may also begin a
    word of it: the same stem with an ending attached)."""
    present = set(hay)
    korean = [h for h in hay if is_hangul(h)]
    return all(n in present or (is_hangul(n) and len(n) >= 2 and any(h.startswith(n) for h in korean)) for n in needles)


def words_match(item_terms: Sequence[str], message_terms: Sequence[str]) -> bool:
    """The entry's item words all appear in the message, or the message's words all appear in the item."""
    if not item_terms or not message_terms:
        return False
    return _covered(item_terms, message_terms) or _covered(message_terms, item_terms)


def iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def entry_of(stored: StoredSkip) -> SkipEntry:
    return SkipEntry(
        id=stored.id, item=stored.item, reason=stored.reason, expires=iso(stored.expires_at), created_at=iso(stored.created_at)
    )


def meaning_text(item: str, reason: str) -> str:
    """What an entry's vector embeds."""
    return f"{item}. {reason}"


class Skips:
    """The skip list of the caller's namespace."""

    def __init__(self, face: ProtocolFace) -> None:
        self.face = face
        self.store = cast(SkipStore, face.service.store)  # every backend is an AppStore (storage/protocol.py)
        self._lock = threading.Lock()  # the caches below are shared by the worker threads
        self._vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._background: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # model -> (query rows, passage rows)

    # ------------------------------------------------------------ operations

    def add(self, inp: SkipAddInput, ctx: CallContext) -> SkipEntry:
        """Store an entry (the namespace's expired ones are purged in the same transaction)."""
        scope = self.face.write_scope(ctx)
        service = self.face.service
        now = service.clock()
        expires = parse_expiry(inp.expires, now)
        item, reason = service.factory.clean_text(inp.item), service.factory.clean_text(inp.reason)
        embedder = service.embedder
        vector = service.embed_within(meaning_text(item, reason))  # late: embedded when first matched
        new = NewSkip(
            id="skip-" + secrets.token_hex(6),
            item=item,
            reason=reason,
            expires_at=expires,
            embedding=vector,
            embedding_model=embedder.name if embedder is not None and vector is not None else None,
        )
        return entry_of(self.store.add_skip(scope, new, now))

    def check(self, inp: SkipCheckInput, ctx: CallContext) -> SkipCheckResult:
        """The unexpired entries `inp.query` touches, or "not on the skip list"."""
        found = self.matches(inp.query, ctx)
        if not found:
            return SkipCheckResult(query=inp.query, on_skip_list=False, matches=[], message=f"{NOT_ON_LIST}: proceed")
        lines = [f"SKIP {m.item!r} ({m.reason}; until {m.expires}; matched by {m.match})" for m in found]
        return SkipCheckResult(query=inp.query, on_skip_list=True, matches=found, message="\n".join(lines))

    def entries(self, inp: SkipListInput, ctx: CallContext) -> SkipListResult:
        """The namespace's unexpired entries, newest first."""
        scope = self.face.read_scope(ctx)
        stored = self.store.skip_entries(scope, self.face.service.clock())
        return SkipListResult(entries=[entry_of(s) for s in stored], total=len(stored))

    def remove(self, inp: SkipRemoveInput, ctx: CallContext) -> SkipRemoved:
        """Delete an entry; NotFound when the namespace has no unexpired entry of that id."""
        scope = self.face.write_scope(ctx)
        if not self.store.remove_skip(scope, inp.id, self.face.service.clock()):
            raise NotFound(f"no skip entry {inp.id!r} in this namespace (it may have expired); nothing removed")
        return SkipRemoved(id=inp.id, removed=True)

    def matches(self, message: str, ctx: CallContext) -> list[SkipMatch]:
        """The unexpired entries `message` touches: those matching by words first, then those
        matching by meaning, most similar first."""
        scope = self.face.read_scope(ctx)
        stored = self.store.skip_entries(scope, self.face.service.clock())
        if not stored or not message.strip():
            return []
        terms = content_terms(message)
        by_words = [s for s in stored if words_match(content_terms(s.item), terms)]
        found = [self._match(s, "words") for s in by_words]
        matched = {s.id for s in by_words}
        rest = [s for s in stored if s.id not in matched]
        if rest:
            found += [self._match(s, "meaning", score) for s, score in self._by_meaning(message, rest)]
        return found

    # ------------------------------------------------------------ meaning

    def threshold(self) -> float | None:
        """The relative similarity a match by meaning needs (None: no matching by meaning)."""
        service = self.face.service
        embedder = service.embedder
        if embedder is None:
            return None
        configured = service.settings.skip_meaning_threshold
        if configured is not None:
            return configured
        return CALIBRATED_THRESHOLD if embedder.name in CALIBRATED_MODELS else None

    def relative(self, message: str, entries: Sequence[StoredSkip]) -> list[float] | None:
        """Each entry's relative similarity to `message` (None when the embedder cannot answer)."""
        embedder = self.face.service.embedder
        if embedder is None:
            return None
        background = self._background_of(embedder.name)
        query = self.face.service.vectors.query(message)
        if background is None or query is None:
            return None
        b_queries, b_passages = background
        message_base = float(np.mean(b_passages @ query))
        scores: list[float] = []
        for entry in entries:
            vector = self._vector_of(entry, embedder.name)
            if vector is None:
                scores.append(float("-inf"))
                continue
            entry_base = float(np.mean(b_queries @ vector))
            scores.append(float(vector @ query) - 0.5 * (entry_base + message_base))
        return scores

    def _by_meaning(self, message: str, entries: Sequence[StoredSkip]) -> list[tuple[StoredSkip, float]]:
        threshold = self.threshold()
        if threshold is None:
            return []
        scores = self.relative(message, entries)
        if scores is None:
            return []
        hits = [(entry, score) for entry, score in zip(entries, scores) if score >= threshold]
        return sorted(hits, key=lambda hit: -hit[1])

    def _vector_of(self, entry: StoredSkip, model: str) -> np.ndarray | None:
        """The entry's vector under `model`: the stored one, else embedded now (and cached)."""
        if entry.embedding is not None and entry.embedding_model == model:
            return entry.embedding
        key = (model, meaning_text(entry.item, entry.reason))
        with self._lock:
            cached = self._vectors.get(key)
            if cached is not None:
                self._vectors.move_to_end(key)
                return cached
        vector = self.face.service.vectors.passage(key[1])
        if vector is not None:
            with self._lock:
                self._vectors[key] = vector
                while len(self._vectors) > VECTOR_CACHE:
                    self._vectors.popitem(last=False)
        return vector

    def _background_of(self, model: str) -> tuple[np.ndarray, np.ndarray] | None:
        """The background sentences as queries and as passages, embedded once per model."""
        known = self._background.get(model)
        if known is not None:
            return known
        vectors = self.face.service.vectors
        queries = [vectors.query(text) for text in BACKGROUND]
        passages = [vectors.passage(text) for text in BACKGROUND]
        if any(v is None for v in queries) or any(v is None for v in passages):
            return None  # the provider failed: words only this time
        made = (np.stack(queries), np.stack(passages))  # type: ignore[arg-type]
        self._background[model] = made
        return made

    @staticmethod
    def _match(entry: StoredSkip, how: Literal["words", "meaning"], score: float | None = None) -> SkipMatch:
        return SkipMatch(
            id=entry.id,
            item=entry.item,
            reason=entry.reason,
            expires=iso(entry.expires_at),
            match=how,
            similarity=None if score is None else round(score, 4),
        )
