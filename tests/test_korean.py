"""Korean retrieval: particles attached to nouns on both backends, and a slice of the parity probe
(bench/data/korean_probe.json) recalled in Korean and in English."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from memento.analysis import index_terms, query_terms, search_terms
from memento.app import App, build_app
from memento.models import AgentScope, CallContext, FragmentType, RecallInput, RememberInput
from memento.settings import Settings
from memento.storage.protocol import SearchFilter

pytestmark = pytest.mark.backends("sqlite", "postgres")

PROBE = Path(__file__).resolve().parents[1] / "bench" / "data" / "korean_probe.json"
SLICE_TOPICS = ("family", "pets", "travel")


@pytest.fixture
def lexical_app(settings: Settings, clock: object) -> Iterator[App]:
    """An app without an embedder: recall is the keyword and full-text tiers alone."""
    built = build_app(settings, embedder=None, clock=clock)  # type: ignore[arg-type]
    yield built
    built.close()


def remember(app: App, content: str) -> str:
    return app.service.remember(RememberInput(content=content, topic="notes", type=FragmentType.FACT), CallContext()).id


def recall(app: App, **kw: object) -> list[str]:
    return [f.id for f in app.service.recall(RecallInput.model_validate({"limit": 10, **kw}), CallContext()).fragments]


def text_tier(app: App, terms: list[str]) -> list[str]:
    return [h.id for h in app.store.text_search(AgentScope("default"), terms, SearchFilter(), 10)]


# ---------------------------------------------------------------- the analyser


def test_a_korean_word_is_indexed_with_its_stem_inside_it() -> None:
    assert {"서울에서", "서울", "에서"} <= set(index_terms("서울에서 일한다"))


def test_a_one_syllable_noun_with_a_particle_is_searched_in_its_indexed_forms() -> None:
    terms = search_terms("우리 집이 어디야?")
    # 집 after a closed syllable takes 은/이/을/으로: the open-syllable forms (집는, 집를) never occur
    assert {"집이", "집", "집은", "집을", "집에", "집으"} <= set(terms) and not {"집는", "집를"} & set(terms)
    assert {"차는", "차를", "차로"} <= set(search_terms("차가 고장 났다")) and "차은" not in search_terms("차가 고장 났다")
    assert "달로" in search_terms("한 달에 얼마야")  # after ㄹ, 으로 is 로


def test_bare_syllables_verb_endings_question_words_and_english_are_not_expanded() -> None:
    for query in ("나 카메라 뭐 써?", "약 살 수 있는 데가 어디야?", "뭐가 좋은지 같이 봐도 돼?", "What did Caroline research in Seoul?"):
        assert search_terms(query) == query_terms(query)


# ---------------------------------------------------------------- both backends


def test_a_noun_with_a_particle_is_found_by_its_stem_as_keyword_and_text(app: App) -> None:
    target = remember(app, "서울에서 일한다")
    remember(app, "부산에 부모님 집이 있다")
    assert recall(app, keywords=["서울"])[0] == target
    assert recall(app, text="서울")[0] == target
    assert text_tier(app, search_terms("서울")) == [target]


def test_a_one_syllable_noun_is_found_whatever_particle_follows_it(lexical_app: App) -> None:
    home = remember(lexical_app, "우리 집은 망원동에 있다")
    remember(lexical_app, "회사는 판교 테크노밸리에 있다")
    # the index holds 집은 whole (a two-syllable word): without the expansion 집이 finds nothing
    assert text_tier(lexical_app, query_terms("우리 집이 어디야?")) == []
    assert text_tier(lexical_app, search_terms("우리 집이 어디야?")) == [home]
    assert text_tier(lexical_app, search_terms("집에서 가까운 곳")) == [home]
    assert recall(lexical_app, text="우리 집이 어디야?")[0] == home


# ---------------------------------------------------------------- the probe


def probe_slice() -> tuple[list[dict[str, str]], list[dict[str, object]]]:
    data = json.loads(PROBE.read_text(encoding="utf-8"))
    memories = [m for m in data["memories"] if m["topic"] in SLICE_TOPICS]
    ids = {m["id"] for m in memories}
    questions = [q for q in data["questions"] if set(q["gold"]) <= ids]
    return memories, questions


def recall_at_5(app: App, memories: list[dict[str, str]], questions: list[dict[str, object]], language: str) -> float:
    by_id = {remember(app, m[language]): m["id"] for m in memories}
    found = 0.0
    for q in questions:
        gold = set(q["gold"])  # type: ignore[call-overload]
        top = {by_id[i] for i in recall(app, text=q[language])[:5]}
        found += len(gold & top) / len(gold)
    return found / len(questions)


def test_the_probe_data_is_parallel_and_well_formed() -> None:
    data = json.loads(PROBE.read_text(encoding="utf-8"))
    ids = [m["id"] for m in data["memories"]]
    assert len(ids) == len(set(ids)) >= 200 and len(data["questions"]) >= 100
    assert all(m["en"].strip() and m["ko"].strip() for m in data["memories"])
    assert all(q["gold"] and set(q["gold"]) <= set(ids) and q["en"].strip() and q["ko"].strip() for q in data["questions"])


@pytest.mark.parametrize("language", ["ko", "en"])
def test_a_slice_of_the_probe_is_recalled_by_the_text_tiers(lexical_app: App, language: str) -> None:
    memories, questions = probe_slice()
    assert len(memories) >= 60 and len(questions) >= 40
    assert recall_at_5(lexical_app, memories, questions, language) >= 0.85
