"""The common-term policy and the rescoring of the full-text tier, shared by every backend.

In a large store a term found in more than COMMON_TERM_SHARE of the fragments acts almost as a
stop word: ranking every fragment that contains it is what makes a question like "what did X
say" slow. Such a term selects no candidates; the rarer terms do, and the common one then only
scores what they found (`plan`, then `rescore`: the MaxScore idea — a term whose best possible
contribution cannot lift a document that matches nothing else is never scanned). So "Alice" in
"Where does Alice's mother live?" still separates Alice's answer from Bob's when Alice is in a
fifth of the store. When every term is common, the two rarest select.

Both the store size and the document frequencies are counted within the caller's scope (its own
rows and the shared pool it sees), so another agent's data never changes which of your terms
select or how they weigh. Backends supply the counts and the candidates; this module decides.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import math
import threading
import time
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, ParamSpec, TypeVar, cast

from ..analysis import index_terms, words

T = TypeVar("T")
P = ParamSpec("P")
log = logging.getLogger(__name__)

COMMON_TERM_SHARE = 0.02
COMMON_TERM_MIN_DOCS = 2_000
COUNT_TTL_S = 10.0  # scope sizes are magnitudes for a heuristic: a few seconds old is fine
FREQUENT_TTL_S = 300.0  # a term in thousands of memories: its count moves little in minutes
FREQUENT_KEEP = 4_096  # such counts kept at most (the commonest terms of a store are few)


def common_df(total: int) -> int:
    """The document frequency from which a term is common: df <= total * share  <=>  df < this."""
    return int(total * COMMON_TERM_SHARE) + 1


class Refresher:
    """One background thread that computes stale cached values anew (`CountCache.get(later=...)`).

    A count over every live row of a scope grows with the store (~0.1-0.2 s at a million rows on
    either backend, more with long rows): computed on the recall path whenever it goes stale, it
    stalls one recall in every COUNT_TTL_S. Here it runs beside the callers, one job at a time, on
    one thread whose connections (SQLite's per-thread reader) are reused; a job that fails only
    leaves the stale value in place for the next try."""

    def __init__(self, name: str = "memento-count-refresh") -> None:
        self._name = name
        self._jobs: list[tuple[Hashable, Callable[[], None]]] = []
        self._pending: set[Hashable] = set()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, key: Hashable, job: Callable[[], None]) -> bool:
        """Run `job` on the background thread unless one for `key` is already waiting or running
        (or the refresher is closed); whether it was queued."""
        with self._lock:
            if self._closed or key in self._pending:
                return False
            self._pending.add(key)
            self._jobs.append((key, job))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
            self._wake.notify_all()
            return True

    def _loop(self) -> None:
        while True:
            with self._lock:
                while not self._jobs and not self._closed:
                    self._wake.wait()
                if not self._jobs:
                    return
                key, job = self._jobs.pop(0)
            try:
                job()
            except Exception:
                log.debug("refreshing a cached count failed", exc_info=True)
            finally:
                with self._lock:
                    self._pending.discard(key)
                    self._wake.notify_all()

    def idle(self, timeout_s: float = 30.0) -> bool:
        """Wait until no job is waiting or running; whether that happened within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._wake.wait(left)
            return True

    def close(self, timeout_s: float = 5.0) -> None:
        """Drop the jobs not started and wait (up to `timeout_s`) for the running one, so nothing
        reads a store being closed."""
        with self._lock:
            self._closed = True
            for key, _ in self._jobs:
                self._pending.discard(key)
            self._jobs.clear()
            self._wake.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)


class CountCache(Generic[T]):
    """Values (counts) computed on demand and kept for COUNT_TTL_S, per key (thread-safe)."""

    def __init__(self, ttl_s: float = COUNT_TTL_S, clock: Callable[[], float] = time.monotonic, refresher: Refresher | None = None) -> None:
        self._ttl, self._clock = ttl_s, clock
        self._values: dict[Hashable, tuple[float, T]] = {}
        self._lock = threading.Lock()
        self._refresher = refresher

    def get(self, key: Hashable, compute: Callable[[], T], later: Callable[[], T] | None = None) -> T:
        """The kept value while fresh, else `compute()`'s. With `later` (the same value computed
        on any thread, e.g. in a transaction of its own) and a refresher, a stale value is
        returned as it is while `later` computes its successor in the background: only the
        first value of a key is computed on the caller's thread."""
        now = self._clock()
        with self._lock:
            hit = self._values.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        if hit is not None and later is not None and self._refresher is not None:
            self._refresher.submit((id(self), key), lambda: self._set(key, later()))
            return hit[1]
        value = compute()
        self._set(key, value, now)
        return value

    def _set(self, key: Hashable, value: T, now: float | None = None) -> None:
        with self._lock:
            self._values[key] = ((self._clock() if now is None else now) + self._ttl, value)

    def kept(self, key: Hashable) -> tuple[T, bool] | None:
        """The cached value (fresh or not) and whether it is fresh, or None; nothing computed."""
        with self._lock:
            hit = self._values.get(key)
        return None if hit is None else (hit[1], hit[0] > self._clock())

    def renew(self, key: Hashable, later: Callable[[], T], keep: int | None = None) -> bool:
        """Compute `later()` on the refresher's thread and keep it (as `put`); whether a job was
        queued (not without a refresher, nor while one for `key` is waiting or running)."""
        if self._refresher is None:
            return False
        return self._refresher.submit((id(self), key), lambda: self.put(key, later(), keep))

    def fresh(self, key: Hashable) -> T | None:
        """The cached value while it is fresh, else None (nothing computed)."""
        with self._lock:
            hit = self._values.get(key)
        return hit[1] if hit is not None and hit[0] > self._clock() else None

    def put(self, key: Hashable, value: T, keep: int | None = None) -> None:
        """Keep `value` for the TTL; with `keep`, only while fewer than `keep` fresh values are held."""
        now = self._clock()
        with self._lock:
            if keep is not None and len(self._values) >= keep:
                self._values = {k: v for k, v in self._values.items() if v[0] > now}
                if len(self._values) >= keep:
                    return
            self._values[key] = (now + self._ttl, value)

    def peek(self, key: Hashable) -> T | None:
        """The cached value (fresh or not), without computing one."""
        with self._lock:
            hit = self._values.get(key)
        return None if hit is None else hit[1]

    def items(self) -> list[tuple[Hashable, T]]:
        """Every kept (key, value), fresh or not."""
        with self._lock:
            return [(key, value) for key, (_, value) in self._values.items()]

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


class SharedPlans:
    """The term plans of one recall, computed once: the full-text tier (on the calling thread)
    and the text scores of what the vector tier found (on a thread beside it) weigh the same
    terms in the same scope. The second to ask waits for the first's plan instead of counting
    the terms' documents again (at a million memories on PostgreSQL, 2-25 ms a recall on the
    vector tier's thread). Nothing is kept past the recall, so a write is never weighed late."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._plans: dict[Hashable, tuple[threading.Event, list[object]]] = {}

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        with self._lock:
            found = self._plans.get(key)
            if found is None:
                self._plans[key] = found = (threading.Event(), [])
                mine = True
            else:
                mine = False
        done, value = found
        if not mine:
            done.wait()
            if value:
                return cast(T, value[0])
            return compute()  # the first one failed: its error is its own, this call tries again
        try:
            value.append(compute())
        finally:
            done.set()
        return cast(T, value[0])


_SHARED: contextvars.ContextVar[SharedPlans | None] = contextvars.ContextVar("memento_shared_plans", default=None)


@contextmanager
def shared_plans() -> Iterator[None]:
    """Within the block, and in work it starts with a copy of its context (retrieval/beside.py),
    a plan asked for twice (`shared_plan`) is computed once."""
    token = _SHARED.set(SharedPlans())
    try:
        yield
    finally:
        _SHARED.reset(token)


def sharing_plans(call: Callable[P, T]) -> Callable[P, T]:
    """`call` run within its own `shared_plans` block (a recall: retrieval/recall.py)."""

    @functools.wraps(call)
    def shared(*args: P.args, **kwargs: P.kwargs) -> T:
        with shared_plans():
            return call(*args, **kwargs)

    return shared


def shared_plan(key: Hashable, compute: Callable[[], T]) -> T:
    """`compute()`, or the plan computed for `key` earlier in the same `shared_plans` block."""
    plans = _SHARED.get()
    return compute() if plans is None else plans.get(key, compute)


class FrequentCounts:
    """Frequent terms' document counts per scope, each with the cap it was counted up to (None:
    exact), kept FREQUENT_TTL_S (at most FREQUENT_KEEP of them).

    Counting a term in thousands of memories reads its posting list (FTS5's vocabulary table) or
    up to a cap of its term rows (PostgreSQL): milliseconds each time at a million. Its count moves
    little in minutes, so a kept count serves every recall, and once stale it still serves while
    the store's refresher counts it again: only a term's first count is on a caller's thread."""

    def __init__(
        self,
        refresher: Refresher | None,
        ttl_s: float = FREQUENT_TTL_S,
        keep: int = FREQUENT_KEEP,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cache: CountCache[tuple[int, int | None]] = CountCache(ttl_s, clock, refresher)
        self._keep, self._apart = keep, refresher is not None

    def count(
        self,
        key: Hashable,
        words: Sequence[str],
        cap: int | None,
        now: Callable[[Sequence[str], int | None], Mapping[str, int]],
        later: Callable[[Sequence[str], int | None], Mapping[str, int]],
        worth_keeping: Callable[[int], bool],
    ) -> dict[str, int]:
        """Each word's document count in the scope `key`, up to `cap` (None: exact). A kept count
        serves when it is exact, under the cap it was taken with, or taken with a cap at least
        `cap` (then a floor: `cap` is what the caller asked); a stale one serves as well while
        `later` (on the refresher's thread, with its own connection) counts it again with its own
        cap. The rest are counted by `now(words, cap)` (words absent from its answer are in no
        memory of the scope); counts `worth_keeping` are kept."""
        out: dict[str, int] = {}
        for word in dict.fromkeys(words):
            hit = self.cache.kept((key, word))
            if hit is None:
                continue
            (n, at), fresh = hit
            if not fresh and not self._apart:
                continue  # without a refresher, a stale count is counted again now
            if at is None or n < at or (cap is not None and cap <= at):
                out[word] = n if cap is None else min(n, cap)
                if not fresh:
                    self.cache.renew((key, word), functools.partial(_recount, later, word, at), self._keep)
        asked = [w for w in dict.fromkeys(words) if w not in out]
        if asked:
            for word, n in now(asked, cap).items():
                out[word] = int(n)
                if worth_keeping(int(n)):
                    self.cache.put((key, word), (int(n), cap), keep=self._keep)
        return out

    def peek(self, word: str) -> dict[Hashable, int]:
        """Each scope's kept count of `word`, fresh or not (nothing counted)."""
        return {key[0]: n for key, (n, _) in self.cache.items() if isinstance(key, tuple) and key[1] == word}

    def clear(self) -> None:
        self.cache.clear()


def _recount(counter: Callable[[Sequence[str], int | None], Mapping[str, int]], word: str, cap: int | None) -> tuple[int, int | None]:
    return int(counter([word], cap).get(word, 0)), cap


# --- Scoring the full-text candidates -------------------------------------------------------
#
# The index's own rankers (FTS5's bm25 with b = 0.75, PostgreSQL's ts_rank with its log-length
# normalisation and no IDF) pick the candidates; Python then scores the best RESCORE_POOL of
# them again with every present query term, common ones included:
#   Σ_t idf(t) · (tf·(k1+1) / (tf + k1·(1 - b + b·len/avglen)) + δ)          (BM25+)
# b below 0.75 keeps short turns that share one word with the query from outranking the longer
# one that holds the answer; δ rewards each further matched term whatever the length.
# A common term (see `choose`) selects no candidates — so its long posting list is never ranked
# whole — but it still scores them (the MaxScore idea): the cost stays bounded by the rare terms'
# matches, and a name found in many memories still separates the one that answers.

COMMON_IDF_SHARE = 0.10  # a common term's frequency is counted up to this share of the scope
AVERAGE_SAMPLE = 2_000  # the average content length is taken over the scope's latest fragments
AVERAGE_TTL_S = 60.0  # the average length, and the latest memories' term counts (`window`)


@dataclass(frozen=True)
class Scoring:
    """Parameters of the full-text rescoring (MEMENTO_TEXT_* settings)."""

    k1: float = 1.2
    b: float = 0.2  # MEMENTO_TEXT_LENGTH_NORM
    delta: float = 0.5  # MEMENTO_TEXT_MATCH_BONUS
    pool: int = 60  # MEMENTO_TEXT_RESCORE_POOL (docs/benchmarks.md, "Recall with a question: fewer reads")
    common_terms: str = "score"  # MEMENTO_TEXT_COMMON_TERMS: "score" them over the candidates, or "drop" them
    topic_weight: float = 0.3
    postings: int = 1_000  # MEMENTO_TEXT_POSTINGS_BUDGET: matches the selecting terms may bring in a large store
    idf_window: int = 2_000  # MEMENTO_TEXT_IDF_WINDOW: the latest memories whose statistics weigh the terms (0: all)


DEFAULT_SCORING = Scoring()


@dataclass(frozen=True)
class Plan:
    """How to search for some query terms in one scope: `search` selects the candidates,
    `boost` (present common terms, and rare ones beyond the postings budget) only scores them;
    `df` holds both's document frequencies. `newest`: the selecting terms match more than the
    budget, so the store ranks only their newest `newest` matches (None: all of them)."""

    search: list[str]
    boost: list[str]
    df: dict[str, int]
    total: int
    newest: int | None = None
    weighed_over: int | None = None  # with `window`: `df` and `total` are the scope's latest memories'


def window(plan: Plan, size: int, exact: Callable[[Sequence[str]], Mapping[str, int]]) -> Plan:
    """`plan` with its terms weighed by the scope's latest `size` memories instead of all of them.

    Term weights (IDF) describe the vocabulary a recall is likely about. Over a whole large store
    they describe whatever dominates it: 100,000 package summaries beside a conversation make
    "feel" or "family" as rare as a name, and a conversation's everyday words then outweigh what
    tells its turns apart (LoCoMo with 100k distractors: R@5 65.4, 67.1 weighed over the latest
    2,000; docs/retrieval.md). The latest memories are what an agent is working on now; their
    statistics weigh the terms, as they set the average length. Which terms select candidates is
    unchanged (the postings budget is about cost, over the whole scope).

    `exact(terms)` counts the terms' documents among the latest `size` (backends, bounded: only
    terms under the common-term threshold of the whole scope are counted; a common term's share
    of the window is taken as its share of the scope, which reads no posting list). A store that
    fits in the window is weighed whole, as before."""
    if size <= 0 or plan.total <= size or not plan.df:
        return plan
    common = plan.total + 1 if plan.total < COMMON_TERM_MIN_DOCS else common_df(plan.total)  # as `plan` decides
    rare = [t for t, n in plan.df.items() if n < common]
    counted = dict(exact(rare)) if rare else {}
    df = {t: counted.get(t, 0) if n < common else max(1, round(n * size / plan.total)) for t, n in plan.df.items()}
    return Plan(plan.search, plan.boost, df, size, plan.newest, weighed_over=size)


def plan(
    terms: Sequence[str], total: int, capped_df: Callable[[Sequence[str], int], Mapping[str, int]], scoring: Scoring = Scoring()
) -> Plan:
    """The search plan for `terms` in a scope of `total` live fragments.

    `capped_df(terms, cap)` gives each term's document frequency in the scope, which may stop
    counting at `cap`. Below COMMON_TERM_MIN_DOCS every present term selects candidates; above
    it the common ones only score them — or are dropped, with `scoring.common_terms` "drop" —
    and when every term is common, the two rarest select."""
    terms = list(dict.fromkeys(terms))
    if not terms:
        return Plan([], [], {}, total)
    small = total < COMMON_TERM_MIN_DOCS
    common = max(total, 1) + 1 if small else common_df(total)
    df = dict(capped_df(terms, common))
    present = [t for t in terms if df.get(t, 0) > 0]
    rare = [t for t in present if df[t] < common]
    frequent = [t for t in present if df[t] >= common]
    reach = dict(df)  # what the postings budget goes by: a count that stopped at its cap may be far short
    if frequent and (scoring.common_terms == "score" or not rare):
        # Counted further (bounded: COMMON_IDF_SHARE of the scope) for an honest IDF.
        cap = max(common, int(total * COMMON_IDF_SHARE) + 1)
        df.update(capped_df(frequent, cap))
        reach.update({t: df[t] if df[t] < cap else max(df[t], scoring.postings + 1) for t in frequent})
    if not rare and frequent:
        ordered = sorted(frequent, key=lambda t: df[t])
        rare, frequent = ordered[:2], ordered[2:]
    boost = frequent if scoring.common_terms == "score" else []
    newest = None
    if not small:
        rare, spilled = within_budget(rare, reach, scoring.postings)
        boost = [*spilled, *boost]
        if sum(reach[t] for t in rare) > scoring.postings:
            newest = scoring.postings
    return Plan(rare, boost, {t: df[t] for t in (*rare, *boost)}, total, newest)


def within_budget(terms: Sequence[str], df: Mapping[str, int], budget: int) -> tuple[list[str], list[str]]:
    """(selecting, spilled): the rarest terms while their document frequencies add up to at most
    `budget` (the rarest always selects), and the others, which then only score (MaxScore: the
    rarer a term, the more a match of it weighs; the cost of ranking the matches is their number,
    so it stays bounded however large the store grows)."""
    ordered = sorted(terms, key=lambda t: (df[t], t))
    chosen: list[str] = []
    used = 0
    for term in ordered:
        if chosen and used + df[term] > budget:
            break
        chosen.append(term)
        used += df[term]
    keep = set(chosen)
    return [t for t in terms if t in keep], [t for t in terms if t not in keep]


def idf(df: int, total: int) -> float:
    """BM25's inverse document frequency (never negative)."""
    return math.log(1.0 + (max(total, df) - df + 0.5) / (df + 0.5))


def rescore(plan: Plan, docs: Sequence[tuple[str, str, str, str]], avg_length: float, scoring: Scoring) -> list[tuple[str, float]]:
    """`docs` — (id, content, keywords, topic) in the index's order — scored with every term of
    `plan` (BM25+ above), best first; ties keep the index's order. A document's length is its
    content's length in characters (`avg_length`: the scope's average), which is all the
    normalisation needs: the ratio to the average."""
    weights = {t: idf(plan.df[t], plan.total) for t in (*plan.search, *plan.boost)}
    avg = max(avg_length, 1.0)
    topics: dict[str, dict[str, float]] = {}
    scored: list[tuple[float, int, str]] = []
    for order, (doc_id, content, keywords, topic) in enumerate(docs):
        tf = TEXTS.counts(content + " " + keywords, weights)
        if topic not in topics:
            topics[topic] = term_counts(topic, weights)
        for term, n in topics[topic].items():
            tf[term] = tf.get(term, 0.0) + scoring.topic_weight * n
        norm = scoring.k1 * (1.0 - scoring.b + scoring.b * len(content) / avg)
        score = sum(weights[t] * (f * (scoring.k1 + 1.0) / (f + norm) + scoring.delta) for t, f in tf.items())
        scored.append((-score, order, doc_id))
    scored.sort()
    return [(doc_id, -neg) for neg, _, doc_id in scored]


# Rescoring analyses the text of every candidate, and a store's candidates come back recall after
# recall: the analysis of the texts seen last is kept (~8 bytes of memory per character kept).
# In a large store most candidates are new to each recall, so a text is analysed whole and kept
# the second time it is met; the first time only the words that can give a wanted term are
# (term_counts: ~7 us a LoCoMo turn against ~11 whole; a kept one is read in ~0.5).
TEXT_TERMS_KEEP = 8_192  # texts at most
TEXT_TERMS_CHARS = 1_000_000  # characters at most, over all the texts kept
TEXT_TERMS_LONGEST = 8_000  # a longer text is analysed every time (term_counts)
TEXT_TERMS_MET = 65_536  # texts met once remembered (by hash) at most, before they are forgotten together


class TextTerms:
    """Each kept text's index terms with their counts, as the indexer analyses it (thread-safe;
    the oldest quarter goes when a bound is reached). A text is kept the second time it is met."""

    def __init__(
        self, keep: int = TEXT_TERMS_KEEP, chars: int = TEXT_TERMS_CHARS, longest: int = TEXT_TERMS_LONGEST, met: int = TEXT_TERMS_MET
    ) -> None:
        self.keep, self.chars, self.longest, self.met = keep, chars, longest, met
        self._kept: dict[str, dict[str, int]] = {}
        self._met: set[int] = set()  # hashes of texts met once and not kept
        self._size = 0
        self._lock = threading.Lock()

    def counts(self, text: str, wanted: Collection[str]) -> dict[str, float]:
        """How often each of the `wanted` index terms occurs in `text` (what term_counts gives)."""
        found = self._kept.get(text)
        if found is None:
            if len(text) > self.longest:
                return term_counts(text, wanted)
            key = hash(text)
            if key not in self._met:
                with self._lock:
                    if len(self._met) >= self.met:
                        self._met.clear()
                    self._met.add(key)
                return term_counts(text, wanted)
            found = {}
            for word in words(text):
                for term in _word_terms(word):
                    found[term] = found.get(term, 0) + 1
            with self._lock:
                self._met.discard(key)
                if len(self._kept) >= self.keep or self._size + len(text) > self.chars:
                    for old in list(self._kept)[: max(1, len(self._kept) // 4)]:
                        del self._kept[old]
                        self._size -= len(old)
                if text not in self._kept:
                    self._kept[text] = found
                    self._size += len(text)
        return {t: float(found[t]) for t in wanted if t in found}

    def clear(self) -> None:
        """Forget every text kept or met (the analyser changed)."""
        with self._lock:
            self._kept.clear()
            self._met.clear()
            self._size = 0

    def __len__(self) -> int:
        return len(self._kept)


TEXTS = TextTerms()


def term_counts(text: str, wanted: Collection[str]) -> dict[str, float]:
    """How often each of the `wanted` index terms occurs in `text`, as the indexer analyses it.

    Only words that can yield a wanted term are analysed: an ASCII word's stem keeps its first two
    letters (but for the stemmer's dying/lying/tying -> die/lie/tie), so other words are skipped
    unseen (most of them); any other word is analysed whole."""
    prefixes = {t[:2] for t in wanted} | {t[0] + "y" for t in wanted if t[1:2] == "i"}
    out: dict[str, float] = {}
    for word in words(text):
        bare = word.replace("'", "")
        if bare.isascii() and bare[:2] not in prefixes:
            continue
        for term in _word_terms(word):
            if term in wanted:
                out[term] = out.get(term, 0.0) + 1.0
    return out


@functools.lru_cache(maxsize=65536)
def _word_terms(word: str) -> tuple[str, ...]:
    """One word's index terms (the analyser is pure; the words of candidate texts repeat a lot)."""
    return tuple(index_terms(word))
