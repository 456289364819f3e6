"""Stemming is the same from any number of threads, and with either Snowball backend.

A recall analyses text on two threads at once (the vector tier's helper scores the texts it found
while the caller ranks the full-text matches), and a server analyses the writes and reads of many
requests at once. A Snowball stemmer object holds the word it is working on: one object shared by
threads gave wrong stems ("about" -> "anyon") or raised IndexError, and the analyser's stem cache
then kept the wrong stem for the life of the process (memento/analysis.py).
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import snowballstemmer.english_stemmer as python_snowball
import Stemmer  # PyStemmer: a runtime dependency (snowballstemmer's C backend)

from memento import analysis
from memento.storage import terms

ROOT = Path(__file__).resolve().parents[1]


def vocabulary() -> list[str]:
    """The distinct lower-case words of the project's own prose (several thousand)."""
    found: set[str] = set()
    for path in [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]:
        found.update(re.findall(r"[a-z]+", path.read_text(encoding="utf-8").lower()))
    return sorted(found)


@pytest.fixture
def python_stemmer(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The pure-Python Snowball stemmer (what a platform without PyStemmer's wheel runs), with the
    analyser's caches emptied before and after, and threads switched as often as possible."""
    monkeypatch.setattr(analysis, "STEMMER_FACTORY", python_snowball.EnglishStemmer)
    analysis._stem.cache_clear()
    terms._word_terms.cache_clear()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)
        analysis._stem.cache_clear()
        terms._word_terms.cache_clear()


def test_words_stemmed_on_many_threads_get_the_stems_one_thread_gives(python_stemmer: None) -> None:
    words = vocabulary()
    assert len(words) > 3000
    alone = python_snowball.EnglishStemmer()
    expected = {w: alone.stemWord(w) for w in words}
    wrong: list[tuple[str, str, str]] = []
    errors: list[BaseException] = []

    def stem_all(part: list[str]) -> None:
        try:
            for word in part:
                got = analysis.stem(word)
                if got != (expected[word] or word):
                    wrong.append((word, got, expected[word]))
        except BaseException as exc:  # noqa: BLE001 - every failure is reported below
            errors.append(exc)

    threads = [threading.Thread(target=stem_all, args=(words[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert wrong == []


def test_a_recall_and_writes_on_other_threads_analyse_text_as_one_thread_does(python_stemmer: None) -> None:
    """The analyses the full-text tier uses (index terms of a text; the rescoring's kept counts),
    run by several threads at once, are those of a single thread."""
    words = vocabulary()
    texts = [" ".join(words[i : i + 12]) for i in range(0, len(words) - 12, 12)]
    alone = python_snowball.EnglishStemmer()
    expected = [[alone.stemWord(w) or w for w in analysis.words(t)] for t in texts]
    results: dict[int, list[list[str]]] = {}
    counted: dict[int, list[dict[str, float]]] = {}
    kept = terms.TextTerms()

    def analyse(worker: int) -> None:
        results[worker] = [analysis.index_terms(t) for t in texts]
        counted[worker] = [kept.counts(t, set(e)) for t, e in zip(texts, expected, strict=True)]

    threads = [threading.Thread(target=analyse, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for worker in range(3):
        assert results[worker] == expected
        for text_terms, counts in zip(expected, counted[worker], strict=True):
            assert counts == {term: float(text_terms.count(term)) for term in set(text_terms)}


def test_the_c_stemmer_gives_the_stems_of_the_python_one() -> None:
    """Stores written with one backend are searched with the other (a platform without PyStemmer's
    wheel falls back to the pure-Python stemmer): the stems, and so the index terms, must agree."""
    words = vocabulary() + ["running", "researching", "dying", "lying", "generously", "knightly", "skies", "news"]
    c, python = Stemmer.Stemmer("english"), python_snowball.EnglishStemmer()
    differ = [(w, c.stemWord(w), python.stemWord(w)) for w in words if c.stemWord(w) != python.stemWord(w)]
    assert differ == []
    assert isinstance(analysis.STEMMER_FACTORY(), Stemmer.Stemmer)  # the dependency is what runs by default
