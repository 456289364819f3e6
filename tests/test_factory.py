"""The fragment factory: defaults, TTL table, redaction, truncation, hashing, keywords, tokens."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from memento import factory
from memento.analysis import extract_keywords
from memento.factory import FragmentFactory, TokenCounter, content_hash, infer_ttl, new_fragment_id, truncate
from memento.models import FragmentType, TTLTier
from memento.redaction import redact_pii

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("type_", "importance"), [("preference", 0.95), ("error", 0.9), ("decision", 0.8), ("procedure", 0.7), ("relation", 0.6), ("fact", 0.5)]
)
def test_importance_defaults_per_type(type_: str, importance: float) -> None:
    draft = FragmentFactory().draft(content="x y z", topic="t", type_=FragmentType(type_), created_at=NOW)
    assert draft.importance == importance


@pytest.mark.parametrize(
    ("type_", "importance", "tier"),
    [
        ("preference", 0.1, "permanent"),  # preference wins regardless of importance
        ("fact", 0.8, "permanent"),
        ("decision", 0.8, "permanent"),
        ("error", 0.7, "hot"),
        ("procedure", 0.7, "hot"),
        ("fact", 0.6, "warm"),
        ("fact", 0.5, "warm"),
        ("relation", 0.49, "cold"),
        ("error", 0.9, "permanent"),  # importance >= 0.8 is evaluated before the error rule
    ],
)
def test_ttl_tier_follows_the_seed_table_in_order(type_: str, importance: float, tier: str) -> None:
    assert infer_ttl(FragmentType(type_), importance) is TTLTier(tier)


def test_api_keys_are_redacted() -> None:
    text = "openai sk-" + "a" * 40 + " google AIza" + "B" * 35
    assert redact_pii(text) == "openai [REDACTED_API_KEY] google [REDACTED_API_KEY]"


def test_emails_are_redacted() -> None:
    assert redact_pii("write to jane.doe+x@example.co.kr today") == "write to [REDACTED_EMAIL] today"


@pytest.mark.parametrize("text", ["password: hunter2", "passwd=hunter2", "PWD = hunter2", "비밀번호: hunter2", "비번=hunter2"])
def test_password_values_are_redacted(text: str) -> None:
    out = redact_pii(text)
    assert "hunter2" not in out and "[REDACTED_PWD]" in out


@pytest.mark.parametrize("number", ["010-1234-5678", "01012345678", "011 123 4567", "019-123-4567"])
def test_korean_mobile_numbers_are_redacted(number: str) -> None:
    assert redact_pii(f"call {number} now") == "call [REDACTED_PHONE] now"


def test_non_phone_digits_survive_redaction() -> None:
    assert redact_pii("order 2024-01-15 costs 12345") == "order 2024-01-15 costs 12345"


def test_content_over_300_chars_is_truncated_with_ellipsis() -> None:
    out = truncate("a" * 500)
    assert len(out) == 300 and out.endswith("…")
    assert truncate("short") == "short"


def test_hash_is_taken_after_redaction_and_truncation() -> None:
    factory = FragmentFactory()
    one = factory.draft(content="key sk-" + "a" * 40, topic="t", type_=FragmentType.FACT, created_at=NOW)
    two = factory.draft(content="key sk-" + "b" * 40, topic="t", type_=FragmentType.FACT, created_at=NOW)
    assert one.content == "key [REDACTED_API_KEY]"
    assert one.content_hash == two.content_hash == content_hash("key [REDACTED_API_KEY]")
    assert re.fullmatch(r"[0-9a-f]{16}", one.content_hash)


def test_keywords_are_extracted_by_frequency_without_stopwords() -> None:
    keywords = extract_keywords("The database is slow. The database index is missing on the orders table.")
    assert keywords[0] == "database"
    assert "the" not in keywords and "is" not in keywords
    assert len(keywords) <= 5


def test_korean_keywords_drop_particles_and_stopwords() -> None:
    assert extract_keywords("데이터베이스는 느리다 그리고 데이터베이스가 문제다")[0] == "데이터베이스"


def test_given_keywords_are_normalised_not_extracted() -> None:
    draft = FragmentFactory().draft(
        content="anything", topic="t", type_=FragmentType.FACT, keywords=[" Redis ", "redis", "Cache"], created_at=NOW
    )
    assert draft.keywords == ["redis", "cache"]


def test_token_estimate_uses_cl100k_offline() -> None:
    counter = TokenCounter()
    assert counter.exact
    assert counter.count("hello world") == 2


def test_token_estimate_falls_back_to_chars_over_four() -> None:
    counter = TokenCounter()
    counter._loaded, counter._encode = True, None  # the state an encoder that failed to load leaves behind
    assert counter.count("abcdefghi") == 3


def test_token_encoding_loads_on_first_use_not_at_construction() -> None:
    counter = TokenCounter()
    assert counter._encode is None  # a starting server does not pay for the encoding
    counter.warm_up()
    assert counter._encode is not None
    assert counter.count("hello world") == 2


def test_token_counts_kept_for_short_texts_are_the_encoders_and_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = TokenCounter()
    counter.warm_up()
    assert counter._encode is not None
    encode = counter._encode
    calls: list[str] = []
    counter._encode = lambda text: calls.append(text) or encode(text)  # type: ignore[func-returns-value]
    short, long = "Deploys go through the staging cluster first.", "word " * (factory.COUNTED_CHARS // 4)
    assert [counter.count(short) for _ in range(3)] == [len(encode(short))] * 3
    assert calls == [short]  # counted once, then kept
    assert [counter.count(long) for _ in range(2)] == [len(encode(long))] * 2
    assert calls.count(long) == 2  # a long text is counted every time, never kept
    monkeypatch.setattr(factory, "COUNTED_TEXTS", 10)
    for i in range(25):
        assert counter.count(f"note number {i}") == len(encode(f"note number {i}"))
        assert len(counter._counted) <= 10


def test_fragment_ids_are_frag_and_16_hex() -> None:
    ids = {new_fragment_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(re.fullmatch(r"frag-[0-9a-f]{16}", i) for i in ids)
