"""Text analysis shared by keyword extraction (factory) and full-text search (storage).

English words are lower-cased and stemmed (research/researching match); Hangul words are kept
whole and also split into character bigrams so that a particle-suffixed form (`회의가`) is found
by its stem (`회의`). The same analyser runs at write and at query time; the full-text tier's
query (`search_terms`) also looks a one-syllable noun with a particle up in the forms the index
holds it in (`집이` -> `집은`, `집에`, ...).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import Counter
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import snowballstemmer

_WORD = re.compile(r"[\w]+(?:['’][\w]+)*", re.UNICODE)
_HANGUL = re.compile(r"[\uac00-\ud7a3]")

ENGLISH_STOPWORDS = frozenset(
    """a about above after again against all am an and any are aren't as at be because been before
    being below between both but by can can't cannot could couldn't did didn't do does doesn't doing
    don't down during each few for from further had hadn't has hasn't have haven't having he he'd
    he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if in into
    is isn't it it's its itself let's me more most mustn't my myself no nor not of off on once only
    or other ought our ours ourselves out over own same shan't she she'd she'll she's should
    shouldn't so some such than that that's the their theirs them themselves then there there's
    these they they'd they'll they're they've this those through to too under until up very was
    wasn't we we'd we'll we're we've were weren't what what's when when's where where's which while
    who who's whom why why's will with won't would wouldn't you you'd you'll you're you've your
    yours yourself yourselves also just like get got really yeah yes oh ok okay well s t""".split()
)

KOREAN_STOPWORDS = frozenset(
    """이 그 저 것 수 등 들 및 에 의 가 을 를 은 는 와 과 도 로 으로 에서 에게 한 하다 있다 없다 되다
    이다 그리고 그러나 하지만 또는 또 더 매우 너무 정말 아주 때 중 좀 잘 안 못 왜 어떻게 무엇 누가
    언제 어디 이것 저것 그것 우리 저희 제 내 나 너 당신 거 게 건 걸 니다 습니다 합니다 했다 했습니다
    있습니다 입니다""".split()
)

STOPWORDS = ENGLISH_STOPWORDS | KOREAN_STOPWORDS

# Particles commonly attached to Korean nouns; stripped for keyword extraction only.
_KOREAN_PARTICLES = tuple(
    sorted(
        "은 는 이 가 을 를 에 의 와 과 도 로 으로 에서 에게 께 한테 까지 부터 보다 처럼 만 이나 나 이다 입니다 였다 이었다".split(),
        key=len,
        reverse=True,
    )
)

# A Snowball stemmer keeps the word it is working on in the object (snowballstemmer's pure-Python
# classes and PyStemmer's C ones alike): one shared by the threads of a recall (the vector tier's
# helper scores texts while the caller ranks) or of a busy server gave wrong stems ("about" ->
# "anyon") or raised, and the stem cache below kept a wrong one for the life of the process. So
# each thread has its own. snowballstemmer uses PyStemmer's C stemmers when that is installed (it
# is a dependency: ~10x faster; tests/test_analysis_threads.py checks both give the same stems).
STEMMER_FACTORY: Callable[[], Any] = lambda: snowballstemmer.stemmer("english")  # noqa: E731 - swapped by tests
_local = threading.local()


def _stemmer() -> Any:
    found = getattr(_local, "stemmer", None)
    if found is None or getattr(_local, "factory", None) is not STEMMER_FACTORY:
        found = _local.stemmer = STEMMER_FACTORY()
        _local.factory = STEMMER_FACTORY
    return found


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters, digits, Hangul)."""
    return [w.replace("’", "'") for w in _WORD.findall(text.lower())]


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return str(_stemmer().stemWord(word))


def _is_hangul(word: str) -> bool:
    return bool(_HANGUL.search(word))


def stem(word: str) -> str:
    """A lower-cased word as the full-text index stores it: English stemmed, Hangul kept whole."""
    return word if _is_hangul(word) else (_stem(word.replace("'", "")) or word)


def is_hangul(word: str) -> bool:
    return _is_hangul(word)


def _hangul_bigrams(word: str) -> list[str]:
    return [word[i : i + 2] for i in range(len(word) - 1)]


def index_terms(text: str, *, drop_stopwords: bool = False) -> list[str]:
    """Terms for the full-text index (and, with drop_stopwords, for a query)."""
    terms: list[str] = []
    for word in words(text):
        if drop_stopwords and word in STOPWORDS:
            continue
        if _is_hangul(word):
            terms.append(word)
            if len(word) > 2:
                terms.extend(_hangul_bigrams(word))
        else:
            stem = _stem(word.replace("'", ""))
            if stem:
                terms.append(stem)
    return terms


def query_terms(text: str) -> list[str]:
    """Distinct terms of a natural-language query, stop words removed (all kept if none remain)."""
    terms = index_terms(text, drop_stopwords=True) or index_terms(text)
    return list(dict.fromkeys(terms))


# How a one-syllable Korean noun appears in the index when a particle follows it: a word of two
# syllables is indexed whole ("집은"), a longer one also as its bigrams ("집에서" -> "집에").
# So a one-syllable stem is found through its particle's first syllable, in the form that follows
# a closed syllable (집은, 집으로) or an open one (차는, 차로): one-syllable particles and the first
# syllable of longer ones (에서/에게, 까지, 부터, 보다, 처럼, 한테, 이랑/이나).
_ONSETS_AFTER_CONSONANT = tuple("은 이 을 과 으 에 의 도 만 까 부 보 처 한".split())
_ONSETS_AFTER_VOWEL = tuple("는 가 를 와 로 랑 에 의 도 만 까 부 보 처 한".split())


def _closed(syllable: str) -> bool:
    """True when a precomposed Hangul syllable ends in a consonant (has a batchim)."""
    return (ord(syllable) - 0xAC00) % 28 != 0


def _final_l(syllable: str) -> bool:
    """True when a Hangul syllable ends in ㄹ, after which 으로 is 로 (달로, 물로)."""
    return (ord(syllable) - 0xAC00) % 28 == 8


# The particles after which a query word's first syllable is taken for a noun (집이, 집에서). Not
# 도 or 나: after a one-syllable verb they are endings (해도, 가나), not particles.
_STEM_PARTICLES = tuple(
    sorted("은 는 이 가 을 를 에 의 와 과 로 만 랑 으로 에서 에게 까지 부터 보다 처럼 한테 께서 이랑 이나".split(), key=len, reverse=True)
)
# One-syllable words that look like a noun with a particle but are not: bound nouns (데가 = "a
# place to"), question words (뭐가), and the commonest verb and adjective stems, whose endings
# 은/는/을/이 mimic particles (있는, 좋은, 같이, 많이).
_NOT_NOUNS = frozenset("데 적 줄 척 뿐 듯 뭐 뭘 몇 누 하 되 있 없 같 많 좋 싫 싶 보 주 가 오 알 받 사 자 서 타 쓰 크 작 높 깊".split())


def _one_syllable_stem(word: str) -> str | None:
    """The one-syllable noun of a Hangul query word with a particle ("집이", "집에서" -> "집").

    A bare syllable is left alone: in a question it is as often a verb or a question word (써,
    대, 뭐) as a noun, and it already matches the same bare syllable in the index."""
    stem = next((word[: -len(p)] for p in _STEM_PARTICLES if word.endswith(p)), word)
    if len(stem) != 1 or stem == word or not _HANGUL.match(stem) or stem in STOPWORDS or stem in _NOT_NOUNS:
        return None
    return stem


def search_terms(text: str) -> list[str]:
    """The full-text tier's terms for a query: `query_terms`, and for each one-syllable Korean noun
    with a particle in it the forms the index holds that noun under, so "우리 집이" finds "집은
    망원동" (a query-side expansion: every stored index already holds these forms)."""
    terms = query_terms(text)
    extra: list[str] = []
    for word in words(text):
        stem = _one_syllable_stem(word) if _is_hangul(word) else None
        if stem is not None:
            onsets = _ONSETS_AFTER_CONSONANT if _closed(stem) else _ONSETS_AFTER_VOWEL
            onsets += ("로",) if _final_l(stem) else ()
            extra += [stem, *(stem + onset for onset in onsets)]
    return list(dict.fromkeys(terms + extra))


def strip_particle(word: str) -> str:
    """Remove one trailing Korean particle when a stem of two or more syllables remains."""
    for particle in _KOREAN_PARTICLES:
        if word.endswith(particle) and len(word) - len(particle) >= 2:
            return word[: -len(particle)]
    return word


def extract_keywords(text: str, limit: int = 5) -> list[str]:
    """Up to `limit` keywords ranked by term frequency, Korean and English stop words removed."""
    counts: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    for position, word in enumerate(words(text)):
        if _is_hangul(word):
            word = strip_particle(word)
        word = word.replace("'", "")
        if len(word) < 2 and not _is_hangul(word):
            continue
        if word in STOPWORDS or word.isdigit():
            continue
        counts[word] += 1
        first_seen.setdefault(word, position)
    ranked = sorted(counts, key=lambda w: (-counts[w], first_seen[w]))
    return ranked[:limit]


def normalise_keyword(keyword: str) -> str:
    """The stored form of a keyword: trimmed and lower-cased."""
    return " ".join(keyword.lower().split())


def content_hash(text: str) -> str:
    """First 16 hex characters of SHA-256 of the (redacted, truncated) content: the dedupe key of
    a memory, and an erasure's tombstone of it."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
