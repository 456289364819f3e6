"""The full-text tier's term plan and rescoring (storage/terms.py), backend-free."""

from __future__ import annotations

import contextvars
import functools
import threading
from collections.abc import Mapping, Sequence

import pytest

from memento.analysis import index_terms
from memento.storage.terms import (
    COMMON_TERM_MIN_DOCS,
    CountCache,
    FrequentCounts,
    Plan,
    Refresher,
    Scoring,
    TextTerms,
    common_df,
    idf,
    plan,
    rescore,
    shared_plan,
    shared_plans,
    term_counts,
    window,
    within_budget,
)

TOTAL = 10_000
DF = {"alic": 2_500, "mother": 40, "live": 90, "say": 800, "day": 3_000, "week": 500}


def counts(asked: list[int]) -> object:
    def capped(words: Sequence[str], cap: int) -> Mapping[str, int]:
        asked.append(cap)
        return {w: min(DF[w], cap) for w in words if w in DF}

    return capped


def test_a_common_term_scores_the_candidates_the_rare_ones_select() -> None:
    caps: list[int] = []
    chosen = plan(["alic", "mother", "live", "unknown"], TOTAL, counts(caps))  # type: ignore[arg-type]
    assert chosen.search == ["mother", "live"] and chosen.boost == ["alic"]
    # counted past the common threshold for an honest IDF, but never past a tenth of the scope
    assert caps == [common_df(TOTAL), TOTAL // 10 + 1]
    assert chosen.df == {"mother": 40, "live": 90, "alic": 1_001}


def test_drop_keeps_the_rule_before_rescoring() -> None:
    chosen = plan(["alic", "mother"], TOTAL, counts([]), Scoring(common_terms="drop"))  # type: ignore[arg-type]
    assert (chosen.search, chosen.boost) == (["mother"], [])


def test_when_every_term_is_common_the_two_rarest_select_and_the_others_score() -> None:
    chosen = plan(["day", "say", "week"], TOTAL, counts([]), Scoring(postings=3_000))  # type: ignore[arg-type]
    assert chosen.search == ["week", "say"] and chosen.boost == ["day"]


def test_a_small_store_searches_with_every_present_term() -> None:
    small = {"alic": 900, "mother": 3}
    chosen = plan(["alic", "mother"], COMMON_TERM_MIN_DOCS - 1, lambda words, cap: {w: small[w] for w in words})
    assert chosen.search == ["alic", "mother"] and chosen.boost == []


RARE = {"zanzibar": 3, "lighthous": 40, "harbour": 120, "quiet": 180}


def test_rare_terms_select_until_their_matches_reach_the_budget_and_the_rest_score() -> None:
    chosen = plan(list(RARE), TOTAL, lambda words, cap: {w: RARE[w] for w in words}, Scoring(postings=200))
    assert (chosen.search, chosen.boost, chosen.newest) == (["zanzibar", "lighthous", "harbour"], ["quiet"], None)
    assert chosen.df == RARE  # the spilled term still weighs its candidates with its own IDF
    assert within_budget(["quiet", "zanzibar"], RARE, 10) == (["zanzibar"], ["quiet"])


def test_when_the_rarest_term_alone_passes_the_budget_its_newest_matches_are_ranked() -> None:
    chosen = plan(["day", "say", "week"], TOTAL, counts([]), Scoring(postings=400))  # type: ignore[arg-type]
    assert (chosen.search, chosen.boost, chosen.newest) == (["week"], ["say", "day"], 400)


def test_a_small_store_has_no_budget() -> None:
    small = {"alic": 900, "mother": 300}
    chosen = plan(["alic", "mother"], COMMON_TERM_MIN_DOCS - 1, lambda words, cap: {w: small[w] for w in words}, Scoring(postings=100))
    assert (chosen.search, chosen.newest) == (["alic", "mother"], None)


def test_rescoring_weighs_rare_terms_and_forgives_length() -> None:
    chosen = Plan(["potteri"], ["class"], {"potteri": 2, "class": 100}, 1_000)
    short = ("short", "pottery!", "", "general")
    long_ = ("long", "a pottery class at the studio downtown every tuesday evening after work with my sister", "", "general")
    ranked = rescore(chosen, [short, long_], avg_length=60, scoring=Scoring())
    assert [doc for doc, _ in ranked] == ["long", "short"]
    # without the bonus per matched term and with FTS5's length normalisation, the short one wins
    harsh = rescore(chosen, [short, long_], avg_length=60, scoring=Scoring(b=0.75, delta=0.0))
    assert [doc for doc, _ in harsh] == ["short", "long"]
    assert idf(2, 1_000) > idf(100, 1_000) > idf(1_000, 1_000) > 0


def test_ties_keep_the_index_order() -> None:
    chosen = Plan(["potteri"], [], {"potteri": 2}, 1_000)
    docs = [("b", "pottery", "", "t"), ("a", "pottery", "", "t")]
    assert [doc for doc, _ in rescore(chosen, docs, 10, Scoring())] == ["b", "a"]


def test_term_counts_match_the_indexers_analysis() -> None:
    texts = [
        "Caroline's researching adoption agencies; she researched 3 of them in 2023.",
        "Studies show the skies were cloudier than the study said — dying, lying, tying",
        "회의가 내일 오전에 있습니다, 회의실 예약은 Bob's job",
    ]
    for text in texts:
        every = index_terms(text)
        wanted = set(every[::2]) | {"absent", "회의", "stud"}
        assert term_counts(text, wanted) == {t: float(every.count(t)) for t in wanted if t in every}


def test_kept_analyses_give_what_term_counts_gives_within_their_bounds() -> None:
    texts = [
        "Caroline's researching adoption agencies; she researched 3 of them in 2023.",
        "Studies show the skies were cloudier than the study said — dying, lying, tying",
        "회의가 내일 오전에 있습니다, 회의실 예약은 Bob's job",
        "a much longer memory " * 20,
    ]
    kept = TextTerms(keep=3, chars=1_000, longest=300)
    for round_ in range(3):  # met once (only the wanted words analysed), analysed whole and kept, then read from what was kept
        for text in texts:
            every = index_terms(text)
            wanted = set(every[::2]) | {"absent", "회의", "stud", "memori"}
            assert kept.counts(text, wanted) == term_counts(text, wanted), (round_, text)
        if round_ == 0:
            assert len(kept) == 0  # a text met once is not kept
    assert 0 < len(kept) <= 3 and texts[3] not in kept._kept  # the longest text is analysed every time
    small = TextTerms(keep=100, chars=200, longest=200)
    for i in range(20):
        for _ in range(2):
            small.counts(f"memory number {i} about the garden and the harbour", {"garden"})
    assert len(small) > 0 and small._size <= 200
    assert small.counts("memory number 19 about the garden and the harbour", {"garden", "harbour"}) == {"garden": 1.0, "harbour": 1.0}


def test_texts_met_once_are_remembered_up_to_a_bound_and_kept_when_met_again() -> None:
    kept = TextTerms(met=4)
    texts = [f"the harbour ferry leaves at {i} o'clock" for i in range(6)]
    for text in texts[:4]:
        assert kept.counts(text, {"ferri", "harbour"}) == {"ferri": 1.0, "harbour": 1.0}
    assert len(kept) == 0
    kept.counts(texts[0], {"ferri"})  # met again: analysed whole and kept
    assert len(kept) == 1 and texts[0] in kept._kept
    for text in texts[4:]:  # the bound reached: those met once are forgotten together
        kept.counts(text, {"ferri"})
    kept.counts(texts[1], {"ferri"})
    assert texts[1] not in kept._kept  # forgotten, so met once again
    kept.clear()
    assert len(kept) == 0 and kept.counts(texts[0], {"ferri"}) == {"ferri": 1.0} and len(kept) == 0


def test_count_cache_keeps_fresh_values_up_to_a_bound() -> None:
    now = [0.0]
    cache: CountCache[int] = CountCache(ttl_s=10.0, clock=lambda: now[0])
    cache.put("python", 348_000, keep=2)
    cache.put("librari", 163_000, keep=2)
    cache.put("data", 110_000, keep=2)  # full of fresh values: not kept
    assert (cache.fresh("python"), cache.fresh("data")) == (348_000, None)
    now[0] = 11.0  # every value stale: fresh() says so, and a new one finds room
    assert cache.fresh("python") is None
    cache.put("data", 110_000, keep=2)
    assert cache.fresh("data") == 110_000


def test_a_stale_count_is_served_while_its_successor_is_counted_in_the_background() -> None:
    now, counted = [0.0], []
    refresher = Refresher()
    cache: CountCache[int] = CountCache(ttl_s=10.0, clock=lambda: now[0], refresher=refresher)
    assert cache.get("agent", lambda: 100, later=lambda: 0) == 100  # the first value: on the caller
    now[0] = 11.0
    started, release = threading.Event(), threading.Event()

    def later() -> int:
        started.set()
        counted.append(1)
        assert release.wait(30)
        return 120

    assert cache.get("agent", lambda: 0, later=later) == 100  # stale, returned without waiting
    assert started.wait(30)
    assert cache.get("agent", lambda: 0, later=later) == 100  # the refresh running: not queued again
    release.set()
    assert refresher.idle(30) and counted == [1]
    assert cache.get("agent", lambda: 0) == 120  # the successor, fresh


def test_a_failed_refresh_keeps_the_stale_count_and_is_tried_again() -> None:
    now = [0.0]
    refresher = Refresher()
    cache: CountCache[int] = CountCache(ttl_s=10.0, clock=lambda: now[0], refresher=refresher)
    cache.get("agent", lambda: 7)
    now[0] = 11.0

    def failing() -> int:
        raise RuntimeError("database went away")

    assert cache.get("agent", lambda: 0, later=failing) == 7
    assert refresher.idle(30) and cache.peek("agent") == 7
    assert cache.get("agent", lambda: 0, later=lambda: 9) == 7
    assert refresher.idle(30) and cache.get("agent", lambda: 0) == 9
    refresher.close()  # closed: a stale value stays as it is, and nothing runs any more
    now[0] = 30.0
    assert cache.get("agent", lambda: 0, later=lambda: 11) == 9 and refresher.idle(1)
    assert not refresher.submit("x", lambda: None)
    # Without a refresher (or a `later`), a stale value is computed again on the caller.
    plain: CountCache[int] = CountCache(ttl_s=10.0, clock=lambda: now[0])
    plain.get("agent", lambda: 1)
    now[0] = 50.0
    assert plain.get("agent", lambda: 2, later=lambda: 3) == 2


class Postings:
    """A term counter over fixed document frequencies that records each call's thread and words."""

    def __init__(self, df: dict[str, int]) -> None:
        self.df, self.calls = df, []  # type: ignore[var-annotated]
        self.hold: threading.Event | None = None

    def __call__(self, words: Sequence[str], cap: int | None) -> dict[str, int]:
        self.calls.append((threading.current_thread().name, list(words), cap))
        if self.hold is not None:
            assert self.hold.wait(30)
        return {w: self.df[w] if cap is None else min(self.df[w], cap) for w in words if w in self.df}


def test_a_stale_frequent_term_count_serves_while_the_refresher_counts_it_again() -> None:
    now = [0.0]
    refresher = Refresher()
    kept = FrequentCounts(refresher, ttl_s=300.0, clock=lambda: now[0])
    postings = Postings({"python": 348_000, "telepact": 3})
    frequent = lambda n: n >= COMMON_TERM_MIN_DOCS  # noqa: E731
    assert kept.count("agent", ["python", "telepact", "nowhere"], None, postings, postings, frequent) == {"python": 348_000, "telepact": 3}
    assert postings.calls == [("MainThread", ["python", "telepact", "nowhere"], None)]
    # Fresh: the frequent count serves; the rare one (not worth keeping) is counted every time.
    assert kept.count("agent", ["python", "telepact"], None, postings, postings, frequent) == {"python": 348_000, "telepact": 3}
    assert postings.calls[1:] == [("MainThread", ["telepact"], None)]
    # Stale: served as it is, and counted again on the refresher's thread, once.
    now[0] = 301.0
    postings.df["python"] = 351_000
    postings.hold = threading.Event()
    assert kept.count("agent", ["python"], None, postings, postings, frequent) == {"python": 348_000}
    assert kept.count("agent", ["python"], None, postings, postings, frequent) == {"python": 348_000}
    postings.hold.set()
    assert refresher.idle(30)
    assert [c for c in postings.calls[2:] if c[0] == "MainThread"] == []
    assert [c[1] for c in postings.calls[2:]] == [["python"]]
    assert kept.count("agent", ["python"], None, postings, postings, frequent) == {"python": 351_000}
    # Another scope's counts are its own.
    assert kept.count("other", ["python"], None, postings, postings, frequent) == {"python": 351_000}
    assert postings.calls[-1] == ("MainThread", ["python"], None)
    refresher.close()


def test_a_capped_count_serves_only_caps_it_answers() -> None:
    refresher = Refresher()
    kept = FrequentCounts(refresher, clock=lambda: 0.0)
    postings = Postings({"python": 50_000, "data": 3_000})
    always = lambda n: True  # noqa: E731
    assert kept.count("a", ["python", "data"], 10_000, postings, postings, always) == {"python": 10_000, "data": 3_000}
    # "python" reached its cap (a floor): it answers a lower cap, not a higher one; "data" was exact.
    assert kept.count("a", ["python", "data"], 4_000, postings, postings, always) == {"python": 4_000, "data": 3_000}
    assert kept.count("a", ["python", "data"], 20_000, postings, postings, always) == {"python": 20_000, "data": 3_000}
    assert [c[1:] for c in postings.calls] == [(["python", "data"], 10_000), (["python"], 20_000)]
    refresher.close()


def test_without_a_refresher_a_stale_frequent_count_is_counted_again_at_once() -> None:
    now = [0.0]
    kept = FrequentCounts(None, ttl_s=300.0, clock=lambda: now[0])
    postings = Postings({"python": 348_000})
    always = lambda n: True  # noqa: E731
    kept.count("a", ["python"], None, postings, postings, always)
    now[0] = 301.0
    postings.df["python"] = 1
    assert kept.count("a", ["python"], None, postings, postings, always) == {"python": 1}
    assert len(postings.calls) == 2


def test_terms_are_weighed_by_the_latest_memories_in_a_larger_scope() -> None:
    chosen = plan(["feel", "lisbon", "data"], 100_000, lambda terms, cap: {"feel": 300, "lisbon": 40, "data": 20_000})
    asked: list[list[str]] = []

    def latest(terms: Sequence[str]) -> dict[str, int]:
        asked.append(list(terms))
        return {"feel": 250, "lisbon": 35}

    weighed = window(chosen, 2_000, latest)
    assert asked == [["feel", "lisbon"]]  # the common term is not counted: its share is the scope's
    assert weighed.df == {"feel": 250, "lisbon": 35, "data": 400} and weighed.total == 2_000
    assert (weighed.search, weighed.boost, weighed.newest) == (chosen.search, chosen.boost, chosen.newest)  # selection unchanged
    assert weighed.weighed_over == 2_000
    scores = dict(rescore(weighed, [("a", "I feel great", "", "t"), ("b", "lisbon came", "", "t")], 20.0, Scoring()))
    before = dict(rescore(chosen, [("a", "I feel great", "", "t"), ("b", "lisbon came", "", "t")], 20.0, Scoring()))
    assert scores["b"] > scores["a"] and scores["a"] / scores["b"] < before["a"] / before["b"]  # "feel" is everyday in the window


def test_a_scope_within_the_window_or_no_window_is_weighed_whole() -> None:
    chosen = plan(["feel"], 1_500, lambda terms, cap: {"feel": 30})

    def never(terms: Sequence[str]) -> dict[str, int]:
        raise AssertionError("nothing to count")

    assert window(chosen, 2_000, never) is chosen
    big = plan(["feel"], 50_000, lambda terms, cap: {"feel": 30})
    assert window(big, 0, never) is big
    small = plan(["feel", "cat"], 300, lambda terms, cap: {"feel": 30, "cat": 250})
    assert window(small, 50, lambda terms: {"feel": 50, "cat": 0}).df == {"feel": 50, "cat": 0}  # a small scope: every term counted


class TestSharedPlans:
    """One recall's tiers weigh the same terms once: the second to ask waits for the first."""

    def test_outside_a_recall_every_call_computes(self) -> None:
        calls: list[int] = []

        def compute() -> int:
            calls.append(1)
            return len(calls)

        assert [shared_plan("k", compute) for _ in range(3)] == [1, 2, 3]

    def test_within_one_block_a_key_is_computed_once_and_kept_apart_from_other_keys_and_blocks(self) -> None:
        calls: list[str] = []

        def compute(key: str) -> str:
            calls.append(key)
            return f"plan of {key}"

        with shared_plans():
            assert [shared_plan(k, functools.partial(compute, k)) for k in ("a", "b", "a", "b")] == [
                "plan of a",
                "plan of b",
                "plan of a",
                "plan of b",
            ]
        with shared_plans():
            assert shared_plan("a", lambda: compute("a")) == "plan of a"
        assert calls == ["a", "b", "a"]

    def test_the_thread_beside_waits_for_the_plan_in_progress_and_reuses_it(self) -> None:
        started, release = threading.Event(), threading.Event()
        calls: list[str] = []
        got: list[object] = []

        def slow() -> str:
            calls.append(threading.current_thread().name)
            started.set()
            assert release.wait(10)
            return "weighed"

        with shared_plans():
            # as retrieval/beside.py hands the recall's context to its thread (each a copy of it)
            mine, context = contextvars.copy_context(), contextvars.copy_context()
            first = threading.Thread(target=lambda: got.append(mine.run(shared_plan, "terms", slow)), name="caller")
            first.start()
            assert started.wait(10)
            second = threading.Thread(target=lambda: got.append(context.run(shared_plan, "terms", slow)), name="helper")
            second.start()
            second.join(0.2)
            assert second.is_alive()  # waiting, not computing
            release.set()
            first.join(10)
            second.join(10)
        assert got == ["weighed", "weighed"] and calls == ["caller"]

    def test_a_plan_that_fails_fails_its_own_call_and_the_next_asker_computes_again(self) -> None:
        def broken() -> str:
            raise RuntimeError("count failed")

        with shared_plans():
            with pytest.raises(RuntimeError, match="count failed"):
                shared_plan("terms", broken)
            assert shared_plan("terms", lambda: "weighed") == "weighed"
