"""The built-in extractor of distillation, used when no language model is there (or its answer was
unusable): a transcript's sentences are kept when they state a decision, an instruction, a lesson,
a preference or a specific fact, and dropped when they are questions, greetings, filler or an
assistant talking about what it does. English and Korean cues. Deterministic.

It is a sieve, not an understanding: it keeps sentences as they were said (speaker prefixes,
bullets and leading filler words stripped), so a fact spread over two sentences comes out as two
candidates, and a fact stated without any cue or specific value is missed (bench/distill.py
measures how often).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..analysis import STOPWORDS
from .memory_models import ProtocolType


@dataclass(frozen=True)
class Candidate:
    """A memory a transcript suggests: its text, 003 type and tags (from a model; none here)."""

    content: str
    type: ProtocolType
    tags: tuple[str, ...] = ()


def _any(*patterns: str, flags: re.RegexFlag = re.IGNORECASE) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), flags)


SPEAKER = re.compile(
    r"^\s*(?:\*\*|__)?(user|human|me|you|assistant|ai|bot|model|claude|gpt|chatgpt|codex|gemini|agent|system|사용자|유저|나|어시스턴트|에이전트|봇)"
    r"(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?",
    re.IGNORECASE,
)
ASSISTANT_NAMES = frozenset(
    {"assistant", "ai", "bot", "model", "claude", "gpt", "chatgpt", "codex", "gemini", "agent", "어시스턴트", "에이전트", "봇"}
)
BULLET = re.compile(r"^\s*(?:[-*•>]+|\d{1,2}[.)]|#+)\s+")
FILLER = re.compile(
    r"^(?:ok(?:ay)?|so|well|also|and|but|yeah|yes|right|alright|great|cool|actually|btw|by the way|fyi|note|oh|hmm|anyway|"
    r"one more thing|another thing|important|just so you know|for the record|좋아요|네|그리고|아|참|그런데|근데)\s*[,:;!.-]*\s+",
    re.IGNORECASE,
)
ABBREVIATIONS = re.compile(r"\b(e\.g|i\.e|etc|vs|approx|incl|no)\.", re.IGNORECASE)
SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|(?<=[다요죠음함])\.?\s+(?=[가-힣A-Z])")
CODE_FENCE = re.compile(r"```.*?(?:```|$)", re.DOTALL)

QUESTION = _any(
    r"[?？]\s*$",
    r"^(?:what|why|how|when|where|who|which|should we|could we|can we|can you|could you|would you|do you|did you|is it|are there|any idea)\b",
)
PLEASANTRY = _any(
    r"^(?:hi|hello|hey|thanks|thank you|thx|cheers|good (?:morning|afternoon|evening|night)|bye|see you|ok(?:ay)?|sure|great|cool|nice|perfect|"
    r"sounds good|got it|yes|yep|no|nope|lgtm|awesome|wonderful|excellent|done|agreed)\b[\s!.,]*(?:thanks|thank you|again)?[\s!.,]*$",
    r"^(?:thanks|thank you|nice to meet you|welcome)\b",
    r"^(?:안녕|감사|고마워|고맙|넵?\s*[.!]*$|좋아요\s*[.!]*$|좋습니다\s*[.!]*$|알겠|오케이|수고)",
)
META = _any(
    r"^(?:i'?ll|i will|let me|i'?m going to|i am going to|i can|i could|here'?s|here is|here are|sure|certainly|of course|great question|"
    r"i'?ve|i have (?:updated|made|added|changed|created|written|run|fixed|removed|looked|checked)|now i|next,? i|would you like|do you want|"
    r"let me know|feel free|i hope|happy to|glad|good catch|you'?re right|absolutely|below|the following|as requested|i understand|"
    r"i see|i agree|i don'?t know|i'?m not sure|i think|maybe|perhaps|what if|it might|probably|looks like|let'?s (?:see|look|check|try|start|begin)|"
    r"i (?:need|want|would like|'d like|am trying|'m trying) to)\b",
    r"(?:하겠습니다|드릴게요|드리겠습니다|해 ?볼게요|해 ?보겠습니다|살펴보|도와드|말씀하신|확인해 ?보|할까요|볼까요|같아요)",
)
CODE_LIKE = re.compile(r"^(?:\$ |>>> |Traceback|File \"|at [\w.$]+\(|[{}\[\]();]+$)")

DECISION = _any(
    r"\b(?:we|i|team)(?:'ve| have)? decided\b",
    r"\bdecided (?:to|on|that)\b",
    r"\bdecision (?:is|was)\b",
    r"\blet'?s (?:use|go with|stick with|switch to|keep|adopt|move to|standardi[sz]e on|drop|pick(?! up))\b",
    r"\b(?:we(?:'re| are)?|i'?m|i am) going with\b",
    r"\bgo(?:ing)? with\b",
    r"\bwe(?:'ll| will| should) (?:use|go with|stick with|switch to|adopt|move to|drop|keep)\b",
    r"\b(?:we|i|they|team) (?:chose|picked|selected|settled on|opted for|agreed)\b",
    r"\b(?:chose|chosen)\b",
    r"\bsettled on\b",
    r"\bagreed (?:to|on|that)\b",
    r"\bthe plan is\b",
    r"\bfrom now on\b",
    r"하기로\s*(?:했|함|결정|정했)",
    r"기로\s*(?:했|함|정했|결정)",
    r"로\s*결정",
    r"결정(?:했|함|하자|됐)",
    r"(?:으)?로\s*(?:가자|하자|정했)",
    r"선택했",
    r"채택",
)
INSTRUCTION = _any(
    r"^(?:always|never|don'?t|do not|make sure|remember to|be sure to|avoid|please (?:always|never|don'?t|do not|use|make sure|keep|run)|"
    r"must|ensure|use)\b",
    r"\b(?:always|never)\b",
    r"\bmake sure\b",
    r"\bmust(?: not)?\b",
    r"\bshould (?:always|never|not)\b",
    r"\bdon'?t (?:ever )?(?:use|push|commit|deploy|run|merge|touch|change|delete|add|call|edit|forget|rely|put|store|log)\b",
    r"\bdo not\b",
    r"항상",
    r"절대",
    r"반드시",
    r"꼭\s",
    r"하지\s*마",
    r"말\s*것",
    r"금지",
    r"말아야",
    r"(?:해야|써야|돌려야|넣어야)\s*(?:한다|해|합니다|돼|된다)",
)
LESSON = _any(
    r"\bturns? out\b",
    r"\bturned out\b",
    r"\bthe (?:fix|problem|issue|cause|bug|culprit|root cause|reason|trick|solution|workaround) (?:was|is)\b",
    r"\broot cause\b",
    r"\bcaused by\b",
    r"\bbecause\b",
    r"\bfixed (?:it |this |that )?by\b",
    r"\b(?:we|i) (?:found|noticed|learned|realized|discovered|figured out)\b",
    r"\bworkaround\b",
    r"\b(?:fails?|failed|breaks?|broke|crash(?:es|ed)?|times? out|timed out|hangs?|hung) (?:when|if|because|on|with|after|under)\b",
    r"\bis (?:slow|flaky|broken|deprecated)\b",
    r"알고\s*보니",
    r"원인(?:은|이)",
    r"때문",
    r"해결(?:했|됐|책|하려면)",
    r"고쳤",
    r"문제(?:는|가)",
    r"알게\s*(?:됐|되었)",
    r"발견",
)
PREFERENCE = _any(
    r"\bprefer(?:s|red)?\b",
    r"\b(?:i|he|she|they|we) (?:really )?(?:like|love|hate|dislike)s?\b",
    r"\b(?:likes|loves|hates|dislikes)\b",
    r"\bfavou?rite\b",
    r"선호",
    r"좋아(?:해|한다|함|하)",
    r"싫어",
)
SPECIFIC = _any(
    r"\bv?\d+\.\d+(?:\.\d+)?\b",
    r"\b\d+(?:[.,]\d+)?\s?(?:ms|s|sec|seconds?|minutes?|mins?|hours?|h|days?|weeks?|months?|years?|gb|mb|kb|tb|%|percent|requests?|rps|qps|"
    r"users?|lines?|px|cores?|workers?|replicas?|nodes?|connections?|retries|times|x)\b",
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.? \d{1,2}\b",
    r"\b\d{4}-\d{2}-\d{2}\b",
    r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b",
    r"(?:^|\s)(?:~|\.{1,2})?/?[\w.-]+/[\w./-]+",
    r"\b[\w-]+\.(?:py|js|ts|tsx|jsx|json|toml|yaml|yml|md|sql|sh|go|rs|java|kt|rb|cfg|ini|env|lock|txt|csv|html|css)\b",
    r"\b[\w.-]+:\d{2,5}\b",
    r"https?://",
    r"\b[\w.+-]+@[\w-]+\.[\w.]+\b",
    r"`[^`]+`",
    r"\bport \d+\b",
    r"\d+\s?(?:개|명|일|시|분|초|월|년|주|%|gb|mb|번|줄)",
)
# Names: CamelCase, acronyms, a capitalised word inside a sentence (its first word may be any word).
NAME = _any(
    r"\b[A-Za-z]*[a-z][A-Z]\w*",  # camel case: PostgreSQL, GitHub, iOS
    r"\b[A-Z]{2,}[a-z]?\b",  # acronyms: API, CI, DB
    r"(?<=\s)[A-Z][a-z]{2,}\b",  # a capitalised word inside the sentence: Alice, Friday
    r"\b\d+\b",  # a number
    flags=re.NOFLAG,
)
LATIN_WORD = re.compile(r"[A-Za-z][\w.-]*[A-Za-z0-9]")  # inside Korean text: a product, a tool, a name
FACT_VERB = _any(
    r"\b(?:is|are|was|were|lives?|runs?|uses?|owns?|leads?|manages?|handles?|hosts?|stores?|has|have|needs?|requires?|depends on|points? to|"
    r"deadline|due|responsible|in charge|works? (?:on|at)|maintains?|costs?|takes?|supports?|listens on|expires?|starts?|ends?|is called|named)\b",
    r"(?:이다|입니다|이에요|예요|담당|맡|있다|있어요|쓴다|써요|사용한다|사용해요|돌아간다|걸린다|된다|이야)",
)
HANGUL = re.compile(r"[가-힣]")


def split_turns(turns: Sequence[tuple[str | None, str]]) -> list[tuple[str | None, str]]:
    """(role, sentence) pairs: code blocks removed, speaker prefixes read, lines split into sentences."""
    out: list[tuple[str | None, str]] = []
    for role, text in turns:
        speaker = role
        for line in CODE_FENCE.sub("\n", text).splitlines():
            named = SPEAKER.match(line)
            if named:
                speaker = named.group(1).lower()
                line = line[named.end() :]
            line = BULLET.sub("", line).strip()
            if not line or CODE_LIKE.match(line):
                continue
            protected = ABBREVIATIONS.sub(lambda m: m.group(1) + "\x00", line)
            for sentence in SENTENCE_END.split(protected):
                sentence = sentence.replace("\x00", ".").strip()
                if sentence:
                    out.append((speaker, sentence))
    return out


def clean(sentence: str) -> str:
    """The sentence without leading filler words and emphasis marks, capitalised, ending in a full stop."""
    text = sentence.strip().strip("*_").strip()
    while True:
        stripped = FILLER.sub("", text, count=1)
        if stripped == text:
            break
        text = stripped
    text = text.strip(" -–—:;,")
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?。！？" else text + "."


def classify(sentence: str, role: str | None) -> tuple[ProtocolType, float] | None:
    """The sentence's 003 type and how sure the sieve is of it, or None to drop it."""
    if QUESTION.search(sentence) or PLEASANTRY.search(sentence) or META.search(sentence):
        return None
    words = sentence.split()
    hangul = bool(HANGUL.search(sentence))
    if (len(words) < 3 and not hangul) or len(sentence) < 12 or len(sentence) > 400:
        return None
    symbols = sum(not (c.isalnum() or c.isspace()) for c in sentence)
    if symbols > 0.25 * len(sentence):  # a log line, a command, a table row
        return None
    bonus = 0.0 if role in ASSISTANT_NAMES else 0.5
    if DECISION.search(sentence):
        return "decision", 3.0 + bonus
    if INSTRUCTION.search(sentence):
        return "instruction", 3.0 + bonus
    if LESSON.search(sentence):
        return "observation", 2.0 + bonus
    if PREFERENCE.search(sentence):
        return "fact", 2.0 + bonus
    specifics = len(SPECIFIC.findall(sentence)) + len(NAME.findall(sentence)) + _named_first(words)
    if hangul:
        specifics += len(LATIN_WORD.findall(sentence))
    if specifics >= 2 or (specifics and FACT_VERB.search(sentence)):
        return "fact", 1.0 + min(specifics, 3) * 0.25 + bonus
    return None


def _named_first(words: list[str]) -> int:
    """1 when a sentence opens with a name doing something (`Alice owns...`, `Marta from finance
    owns...`): a capitalised uncommon first word with a fact verb among the next three words (a
    capitalised imperative, `Run the suite`, has none)."""
    first = words[0]
    looks_named = len(first) >= 3 and first.isalpha() and first[0].isupper() and first[1:].islower() and first.lower() not in STOPWORDS
    return int(looks_named and bool(FACT_VERB.search(" ".join(words[1:4]))))


def extract(turns: Sequence[tuple[str | None, str]], limit: int) -> list[Candidate]:
    """At most `limit` candidates, the surest first when there are more, in transcript order."""
    found: list[tuple[float, int, Candidate]] = []
    for position, (role, sentence) in enumerate(split_turns(turns)):
        text = clean(sentence)
        verdict = classify(text, role) if text else None
        if verdict is not None:
            found.append((verdict[1], position, Candidate(text, verdict[0])))
    kept = sorted(found, key=lambda f: (-f[0], f[1]))[:limit]
    return [candidate for _, _, candidate in sorted(kept, key=lambda f: f[1])]
