"""Seed 002's search query: FTS5 query syntax parsed into Memento's own query, evaluated and
ranked (Okapi BM25) in Python over the keyed memories of one caller.

Nothing of the query reaches SQL: the syntax (bare words, "phrases", prefix*, AND / OR / NOT,
parentheses, `key:` / `content:` / `tags:` column filters, NEAR(...)) is parsed here, and any
string is either a query or an InvalidArgument naming what is wrong. Words are analysed as
FTS5's unicode61 tokenizer splits them (letters and digits; `_`, `-`, `.` separate) and
stemmed as Memento's full-text index stems them (research/researching match); a Hangul word
also matches a longer word it starts (`회의` finds `회의가`). Precedence is FTS5's: NOT binds
tighter than AND (also implicit, between adjacent terms), AND tighter than OR.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from .analysis import is_hangul, stem
from .errors import InvalidArgument

MAX_TERMS = 64  # leaves in one query
MAX_DEPTH = 32  # nesting of parentheses
COLUMNS = ("key", "content", "tags")
K1 = 1.2
B = 0.75
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_COLUMN = re.compile(r"^(key|content|tags):(.*)$", re.DOTALL)
_OPERATORS = ("AND", "OR", "NOT")


@dataclass(frozen=True)
class Word:
    """One analysed token: as written (lower-cased) and as indexed (stemmed; Hangul whole)."""

    raw: str
    term: str


def analyse(text: str) -> list[Word]:
    """The words of `text`, as both documents and queries are analysed."""
    out: list[Word] = []
    for raw in _TOKEN.findall(text.lower()):
        out.append(Word(raw, stem(raw)))
    return out


# ---------------------------------------------------------------- the query tree


@dataclass(frozen=True)
class Phrase:
    """Consecutive words (one word: a term); `prefix`: the last word is a prefix."""

    words: tuple[Word, ...]
    prefix: bool = False
    column: str | None = None


@dataclass(frozen=True)
class And:
    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Not:
    """`keep NOT drop`: matches what `keep` matches and `drop` does not."""

    keep: Node
    drop: Node


@dataclass(frozen=True)
class Nothing:
    """A leaf without a searchable word (punctuation only): matches no memory."""


Node = Phrase | And | Or | Not | Nothing


@dataclass(frozen=True)
class Query:
    """A parsed query; `root` None: every memory matches (a blank query lists by tags)."""

    root: Node | None
    positive: tuple[Phrase, ...] = ()  # the phrases that score (those outside a NOT's right side)


# ---------------------------------------------------------------- tokens and parsing


@dataclass
class _Tok:
    kind: str  # word | string | ( | ) | , | op
    text: str
    prefix: bool = False


def _lex(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "(),":
            toks.append(_Tok(c, c))
            i += 1
        elif c == '"':
            buf, i = [], i + 1
            while True:
                if i >= n:
                    raise InvalidArgument('query: a "quoted phrase" is not closed')
                if text[i] == '"':
                    if i + 1 < n and text[i + 1] == '"':  # "" stands for one quote
                        buf.append('"')
                        i += 2
                        continue
                    i += 1
                    break
                buf.append(text[i])
                i += 1
            prefix = i < n and text[i] == "*"
            toks.append(_Tok("string", "".join(buf), prefix))
            i += 1 if prefix else 0
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in '(),"':
                j += 1
            word = text[i:j]
            i = j
            if word in _OPERATORS:
                toks.append(_Tok("op", word))
            else:
                toks.append(_Tok("word", word.rstrip("*"), word.endswith("*")))
    return toks


class _Parser:
    def __init__(self, toks: list[_Tok]) -> None:
        self.toks = toks
        self.i = 0
        self.leaves = 0

    def peek(self) -> _Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def parse(self) -> Node:
        node = self.or_(0)
        tok = self.peek()
        if tok is not None:
            raise InvalidArgument(f"query: unexpected {tok.text!r}" + (" (no '(' to close)" if tok.kind == ")" else ""))
        return node

    def or_(self, depth: int) -> Node:
        parts = [self.and_(depth)]
        while (tok := self.peek()) is not None and tok.kind == "op" and tok.text == "OR":
            self.take()
            parts.append(self.and_(depth))
        return parts[0] if len(parts) == 1 else Or(tuple(parts))

    def and_(self, depth: int) -> Node:
        parts = [self.not_(depth)]
        while (tok := self.peek()) is not None and (tok.kind in ("word", "string", "(") or (tok.kind == "op" and tok.text == "AND")):
            if tok.kind == "op":
                self.take()
            parts.append(self.not_(depth))
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def not_(self, depth: int) -> Node:
        node = self.primary(depth)
        while (tok := self.peek()) is not None and tok.kind == "op" and tok.text == "NOT":
            self.take()
            node = Not(node, self.primary(depth))
        return node

    def primary(self, depth: int) -> Node:
        tok = self.peek()
        if tok is None:
            raise InvalidArgument("query: an operator needs a term after it")
        if tok.kind == "op":
            raise InvalidArgument(f"query: {tok.text} needs a term on each side (operators are written in capitals)")
        if tok.kind in (")", ","):
            raise InvalidArgument(f"query: unexpected {tok.text!r}")
        if tok.kind == "(":
            if depth >= MAX_DEPTH:
                raise InvalidArgument(f"query: parentheses nest at most {MAX_DEPTH} deep")
            self.take()
            node = self.or_(depth + 1)
            closing = self.peek()
            if closing is None or closing.kind != ")":
                raise InvalidArgument("query: a '(' is not closed")
            self.take()
            return node
        self.take()
        if tok.kind == "word" and tok.text == "NEAR" and (nxt := self.peek()) is not None and nxt.kind == "(":
            return self.near(depth)
        column = None
        text, prefix = tok.text, tok.prefix
        if tok.kind == "word" and (m := _COLUMN.match(tok.text)):
            column, text = m.group(1), m.group(2)
            if not text:  # `key: "a phrase"` / `key: word`
                value = self.peek()
                if value is None or value.kind not in ("word", "string"):
                    raise InvalidArgument(f"query: {column}: needs a term after it")
                self.take()
                text, prefix = value.text, value.prefix
        return self.leaf(text, prefix, column)

    def near(self, depth: int) -> Node:
        """NEAR(a b, N): every phrase must occur (the distance is not checked)."""
        self.take()  # (
        parts: list[Node] = []
        while (tok := self.peek()) is not None and tok.kind in ("word", "string"):
            self.take()
            parts.append(self.leaf(tok.text, tok.prefix, None))
        if (tok := self.peek()) is not None and tok.kind == ",":
            self.take()
            if (num := self.peek()) is None or num.kind != "word" or not num.text.isdigit():
                raise InvalidArgument("query: NEAR(..., N) needs a number after the comma")
            self.take()
        closing = self.peek()
        if closing is None or closing.kind != ")" or not parts:
            raise InvalidArgument("query: NEAR needs phrases and a closing ')'")
        self.take()
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def leaf(self, text: str, prefix: bool, column: str | None) -> Node:
        self.leaves += 1
        if self.leaves > MAX_TERMS:
            raise InvalidArgument(f"query: at most {MAX_TERMS} terms")
        words = analyse(text)
        if not words:
            return Nothing()
        return Phrase(tuple(words), prefix, column)


def parse(text: str) -> Query:
    """The query `text` says (FTS5 syntax); a blank query matches every memory."""
    toks = _lex(text)
    if not toks:
        return Query(None)
    root = _Parser(toks).parse()
    return Query(root, tuple(_positive(root)))


def _positive(node: Node) -> list[Phrase]:
    if isinstance(node, Phrase):
        return [node]
    if isinstance(node, (And, Or)):
        return [p for part in node.parts for p in _positive(part)]
    if isinstance(node, Not):
        return _positive(node.keep)
    return []


# ---------------------------------------------------------------- documents, matching, BM25


@dataclass
class Document:
    """A keyed memory's searchable text: its key, content and tags, each analysed."""

    fields: dict[str, list[Word]]
    length: int = 0
    _tf: dict[Phrase, int] = field(default_factory=dict)

    @classmethod
    def of(cls, key: str, content: str, tags: Sequence[str]) -> Document:
        fields = {"key": analyse(key), "content": analyse(content), "tags": analyse(" ".join(tags))}
        return cls(fields, sum(len(v) for v in fields.values()))

    def tf(self, phrase: Phrase) -> int:
        """How often the phrase occurs (within one field; in its column only, when it names one)."""
        if phrase not in self._tf:
            names = (phrase.column,) if phrase.column else COLUMNS
            self._tf[phrase] = sum(_occurrences(self.fields[name], phrase) for name in names)
        return self._tf[phrase]

    def matches(self, node: Node) -> bool:
        if isinstance(node, Phrase):
            return self.tf(node) > 0
        if isinstance(node, And):
            return all(self.matches(p) for p in node.parts)
        if isinstance(node, Or):
            return any(self.matches(p) for p in node.parts)
        if isinstance(node, Not):
            return self.matches(node.keep) and not self.matches(node.drop)
        return False


def _same(have: Word, want: Word, prefix: bool) -> bool:
    if prefix:
        return have.raw.startswith(want.raw) or have.term.startswith(want.raw)
    if have.term == want.term:
        return True
    return is_hangul(want.raw) and have.raw.startswith(want.raw)  # a particle-suffixed form


def _occurrences(words: list[Word], phrase: Phrase) -> int:
    size = len(phrase.words)
    last = size - 1
    return sum(
        1
        for start in range(len(words) - size + 1)
        if all(_same(words[start + j], phrase.words[j], phrase.prefix and j == last) for j in range(size))
    )


def bm25(query: Query, docs: Sequence[Document]) -> list[float | None]:
    """Each document's Okapi BM25 score (k1 1.2, b 0.75) over `docs` as the corpus, None where it
    does not match. A blank query matches every document with score 0."""
    if query.root is None:
        return [0.0 for _ in docs]
    total = len(docs)
    avg = (sum(d.length for d in docs) / total) if total else 0.0
    idf: dict[Phrase, float] = {}
    for phrase in set(query.positive):
        having = sum(1 for d in docs if d.tf(phrase) > 0)
        idf[phrase] = math.log(1.0 + (total - having + 0.5) / (having + 0.5))
    scores: list[float | None] = []
    for d in docs:
        if not d.matches(query.root):
            scores.append(None)
            continue
        norm = K1 * (1 - B + B * (d.length / avg if avg else 1.0))
        score = 0.0
        for phrase, weight in idf.items():
            tf = d.tf(phrase)
            if tf:
                score += weight * tf * (K1 + 1) / (tf + norm)
        scores.append(score)
    return scores


def min_max(scores: Sequence[float]) -> list[float]:
    """Scores scaled to [0, 1] by the best and worst of them (all equal: all 1.0)."""
    if not scores:
        return []
    low, high = min(scores), max(scores)
    if high - low <= 1e-12:
        return [1.0 for _ in scores]
    return [(s - low) / (high - low) for s in scores]
