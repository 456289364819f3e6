"""PII and secret masking (000 §6.2): normalise the text, then run a table of detectors.

Normalising first is what makes the detectors hold: NFKC turns full-width digits and letters
into ASCII (`０１０` → `010`, `ｐａｓｓｗｏｒｄ` → `password`), and invisible characters (zero-width
space and joiners, word joiner, BOM, soft hyphen, bidi controls, variation selectors, tag
characters) are removed so they cannot split a label or a number. The normalised text is what
gets stored. Each detector masks one class with its own placeholder; a detector with a `value`
group masks only that group and keeps the label around it. Masking is irreversible.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

PLACEHOLDERS: dict[str, str] = {
    "private_key": "[REDACTED_PRIVATE_KEY]",
    "token": "[REDACTED_TOKEN]",
    "api_key": "[REDACTED_API_KEY]",
    "password": "[REDACTED_PWD]",
    "secret": "[REDACTED_SECRET]",
    "email": "[REDACTED_EMAIL]",
    "iban": "[REDACTED_IBAN]",
    "rrn": "[REDACTED_RRN]",
    "card": "[REDACTED_CARD]",
    "phone": "[REDACTED_PHONE]",
}

# Format (Cf) and control characters, Hangul fillers, variation selectors and tag characters:
# invisible, so they only ever serve to split what a detector would otherwise see.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5"
    "\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0"
    "\ufff9-\ufffb\U0001d173-\U0001d17a\U000e0000-\U000e007f\U000e0100-\U000e01ef]"
)
_ODD_SPACE = re.compile(r"[^\S\n\t ]")  # any other whitespace (NBSP, em space, VT, NEL, ...)

_DASH = "\\-\u2010-\u2015\u2212"  # ASCII hyphen and the Unicode dashes NFKC leaves alone
_SEP = rf"(?:\s?[{_DASH}.]\s?|\s)"  # one separator between digit groups
_NUM_START = r"(?<![0-9A-Za-z+])"
_NUM_END = rf"(?![0-9A-Za-z]|[{_DASH}.,]\d)"
_PLACEHOLDER_AHEAD = r"(?!\[REDACTED)"
MIN_REPEAT_CHARS = 4  # a shorter labelled value is not chased through the rest of the text


def normalise(text: str) -> str:
    """NFKC, invisible characters removed, line breaks as \\n, odd whitespace as plain spaces."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _INVISIBLE.sub("", text)
    text = unicodedata.normalize("NFKC", text)
    text = _INVISIBLE.sub("", text)  # NFKC can map a compatibility filler onto one
    return _ODD_SPACE.sub(" ", text)


def _always(match: re.Match[str]) -> bool:
    return True


@dataclass(frozen=True)
class Detector:
    """One class of sensitive text: where it is, when a match counts, and its placeholder."""

    kind: str
    pattern: re.Pattern[str]
    valid: Callable[[re.Match[str]], bool] = _always

    def apply(self, text: str, seen: dict[str, str]) -> str:
        """The text with every valid match (or its `value` group) replaced by the placeholder;
        each masked labelled value is added to `seen` (value -> placeholder)."""
        placeholder = PLACEHOLDERS[self.kind]
        masks_value = "value" in self.pattern.groupindex

        def replace(match: re.Match[str]) -> str:
            if not self.valid(match):
                return match.group(0)
            if not masks_value:
                return placeholder
            seen.setdefault(_value(match), placeholder)
            start, end = match.span("value")
            whole = match.group(0)
            base = match.start()
            return whole[: start - base] + placeholder + whole[end - base :]

        return self.pattern.sub(replace, text)


# ---------------------------------------------------------------- checks on a candidate match

_STOPWORDS = frozenset(
    """a an the not no never also only just very still now too being set changed stored saved
    hashed encrypted strong weak same different wrong incorrect correct right required optional
    invalid valid expired empty missing reset updated known unknown needed mandatory long short
    secure insecure hidden masked protected visible shown removed deleted compromised leaked
    stolen lost forgotten sent used reused generated random rotated managed in on at of for with
    and or but to by from case-sensitive case my your his her our their its it this that these
    those what which how when where why who always usually often sometimes something anything
    nothing""".split()
)
_HANGUL = re.compile(r"[\uac00-\ud7a3]")
_ASCII_ALNUM = re.compile(r"[A-Za-z0-9]")


def _value(match: re.Match[str]) -> str:
    return match.group("value").strip("\"'`“”‘’「」")


def _plausible_password(match: re.Match[str]) -> bool:
    """After `is`/`는`: anything but an ordinary word (`the password is wrong`, `비밀번호가 틀렸다`)."""
    value = _value(match)
    quoted = match.group("value")[:1] in "\"'`“‘「"
    if quoted:
        return bool(value)
    korean_prose = bool(_HANGUL.search(value)) and not _ASCII_ALNUM.search(value)
    return value.lower().rstrip(".,!?") not in _STOPWORDS and not korean_prose


def _secret_shaped(value: str) -> bool:
    """A made-up string: digits and letters mixed, a symbol inside letters (`p@ss`), or digits."""
    if len(value) < 4:
        return False
    if value.isdigit():
        return True
    has_digit = any(c.isdigit() for c in value)
    inner_symbol = any(not c.isalnum() for c in value[1:-1])
    return any(c.isalpha() for c in value) and (has_digit or inner_symbol)


def _weak_password(match: re.Match[str]) -> bool:
    """A bare `pw hunter2`: only a value that looks made up, never `password reset`; after a
    bare `pin`, only 4–8 digits (`pin numpy==1.26` is about versions)."""
    value = _value(match)
    if match.group("label").lower().startswith("pin"):
        return value.isdigit() and 4 <= len(value) <= 8
    return value.lower() not in _STOPWORDS and _secret_shaped(value)


def _high_entropy(match: re.Match[str]) -> bool:
    """After a token/secret/api-key label: a long value with letters and digits."""
    value = _value(match)
    return len(value) >= 8 and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _token_like(match: re.Match[str]) -> bool:
    """`Bearer <x>`: x has a digit, or is long and mixed-case (not `Bearer authentication`)."""
    value = match.group("value")
    mixed = any(c.isupper() for c in value) and any(c.islower() for c in value)
    return any(c.isdigit() for c in value) or (len(value) >= 16 and mixed)


def _digits(text: str) -> str:
    return "".join(c for c in text if c.isdigit())


def _luhn(number: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(number)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


_CARD_GROUPS = re.compile(rf"[{_DASH} .]+")


def _card(match: re.Match[str]) -> bool:
    """13–19 digits, a card network's first digit, Luhn, and a layout cards are printed in."""
    text = match.group(0)
    number = _digits(text)
    if not 13 <= len(number) <= 19 or number[0] not in "23456" or not _luhn(number):
        return False
    groups = [len(g) for g in _CARD_GROUPS.split(text)]
    separators = set(_CARD_GROUPS.findall(text))
    if len(groups) == 1:
        return True
    if len(separators) != 1:
        return False
    return groups in ([4, 6, 5], [4, 6, 4]) or (all(g == 4 for g in groups[:-1]) and 1 <= groups[-1] <= 4)


def _iban(match: re.Match[str]) -> bool:
    """ISO 13616: 15–34 characters and the mod-97 check."""
    compact = match.group(0).replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def _phone_digits(low: int, high: int) -> Callable[[re.Match[str]], bool]:
    def check(match: re.Match[str]) -> bool:
        return low <= len(_digits(match.group(0))) <= high

    return check


# ---------------------------------------------------------------- the table


def _rx(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags | re.VERBOSE)


_PROVIDER_KEYS = "|".join(
    [
        r"sk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",  # OpenAI, Anthropic
        r"gh[pousr]_[A-Za-z0-9]{20,}",  # GitHub classic and app tokens
        r"github_pat_[A-Za-z0-9_]{20,}",  # GitHub fine-grained
        r"gl(?:pat|dt|rt|ptt|cbt|soat)-[A-Za-z0-9_-]{20,}",  # GitLab
        r"xox[abprs]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,}",  # Slack
        r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|AROA|ANPA|ANVA)[A-Z0-9]{16}",  # AWS access key ids
        r"AIza[0-9A-Za-z_-]{35}",  # Google
        r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9]{20,}",  # Stripe
        r"npm_[A-Za-z0-9]{36}|hf_[A-Za-z0-9]{30,}|pypi-[A-Za-z0-9_-]{50,}",  # npm, Hugging Face, PyPI
        r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}",  # SendGrid
    ]
)

_VALUE = r"""(?P<value>"[^"\n]{1,200}"|'[^'\n]{1,200}'|`[^`\n]{1,200}`|“[^”\n]{1,200}”|‘[^’\n]{1,200}’|「[^」\n]{1,200}」
    |[^\s\uac00-\ud7a3"'`]*[^\s\uac00-\ud7a3"'`.,;:?)\]}>]|\S+)"""
_PW_LABEL = r"""(?:pass(?:word|wd|phrase|code|wort)(?![A-Za-z])|(?<![A-Za-z])(?:pwd|pw|pass|pin(?:\s?(?:code|number))?)(?![A-Za-z])
    |비밀\s?번호|비번|암호|패스\s?워드)"""
_PW_LABEL_BARE = r"""(?P<label>pass(?:word|wd|phrase|wort)(?![A-Za-z])|(?<![A-Za-z])(?:pwd|pw|pin)(?![A-Za-z])
    |비밀\s?번호|비번|암호|패스\s?워드)"""  # not `pass`: "tests pass 1000 runs"
_SECRET_LABEL = r"""(?:aws[\s_.-]?secret(?:[\s_.-]?access)?[\s_.-]?key
    |(?:api|access|auth|refresh|session|secret|private|client|app|bot|webhook|signing|encryption|master)[\s_.-]?(?:key|token|secret)
    |apikey|(?<![A-Za-z])(?:token|secret)(?![A-Za-z])|토큰|시크릿|API\s?키|인증\s?키|비밀\s?키)"""
_STRONG = r"""["'`]?\s*(?::=|=>|->|[:=])\s*"""  # label: value, label=value, "label": "value"
_VERBAL = r"""(?:\s+for\s+(?:the\s+)?[^\s:=]{1,40})?\s+(?:is|was|will\s+be)\s*:?\s+(?:set\s+to\s+|now\s+)?
    |\s+[–—-]{1,2}\s+|\s?(?:는|은|이|가)\s*:?\s*"""  # password is x, password - x, 비밀번호는 x
_WEAK = r"""\s+|\s?(?:를|을)\s+"""  # pw x, 비밀번호를 x로

DETECTORS: tuple[Detector, ...] = (
    Detector(
        "private_key",
        _rx(
            r"""-----BEGIN[A-Z0-9 ]*PRIVATE\ KEY(?:\ BLOCK)?-----.*?
        (?:-----END[A-Z0-9 ]*PRIVATE\ KEY(?:\ BLOCK)?-----|\Z)""",
            re.DOTALL,
        ),
    ),
    Detector("token", _rx(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*")),
    Detector("api_key", _rx(rf"(?<![A-Za-z0-9])(?:{_PROVIDER_KEYS})")),
    Detector(
        "token",
        _rx(
            rf"""authorization["']?\s*[:=]\s*["']?(?:bearer|basic|token|digest)\s+
        {_PLACEHOLDER_AHEAD}(?P<value>[A-Za-z0-9._~+/=-]{{4,}})""",
            re.IGNORECASE,
        ),
    ),
    Detector("token", _rx(rf"\bbearer\s+{_PLACEHOLDER_AHEAD}(?P<value>[A-Za-z0-9._~+/=-]{{8,}})", re.IGNORECASE), _token_like),
    Detector("password", _rx(r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://[^:/@\s]+:(?P<value>[^@\s/]+)@", re.IGNORECASE)),
    Detector("password", _rx(rf"{_PW_LABEL}(?:{_STRONG}){_PLACEHOLDER_AHEAD}{_VALUE}", re.IGNORECASE)),
    Detector("password", _rx(rf"{_PW_LABEL}(?:{_VERBAL}){_PLACEHOLDER_AHEAD}{_VALUE}", re.IGNORECASE), _plausible_password),
    Detector("password", _rx(rf"{_PW_LABEL_BARE}(?:{_WEAK}){_PLACEHOLDER_AHEAD}{_VALUE}", re.IGNORECASE), _weak_password),
    Detector(
        "secret",
        _rx(
            rf"""{_SECRET_LABEL}(?:{_STRONG}|{_VERBAL}|{_WEAK})["'`]?{_PLACEHOLDER_AHEAD}
        (?P<value>[A-Za-z0-9_\-+/=.~]{{8,}})""",
            re.IGNORECASE,
        ),
        _high_entropy,
    ),
    # The look-behinds let a match start only where a local part can begin: linear time.
    Detector(
        "email",
        _rx(r"""(?<![\w!#$%&*+/=?^~.-])[\w!#$%&*+/=?^~-]+(?:\.[\w!#$%&*+/=?^~-]+)*
        @(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z]{2,}"""),
    ),
    Detector(
        "email",
        _rx(
            r"""(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+\s*[\[(]\s*at\s*[\])]\s*[A-Za-z0-9-]+
        (?:\s*[\[(]\s*dot\s*[\])]\s*[A-Za-z0-9-]+)+""",
            re.IGNORECASE,
        ),
    ),
    Detector("iban", _rx(r"(?<![0-9A-Za-z])[A-Z]{2}\d{2}(?:\ ?[A-Z0-9]{4}){2,7}(?:\ ?[A-Z0-9]{1,3})?(?![0-9A-Za-z])"), _iban),
    Detector(
        "rrn",
        _rx(rf"""{_NUM_START}\d{{2}}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])
        (?:\s?[{_DASH}]\s?|\ )[1-8]\d{{6}}{_NUM_END}"""),
    ),
    Detector(
        "rrn",
        _rx(
            rf"""(?:주민(?:등록)?\s?번호|resident\s+registration\s+number|rrn)(?:{_STRONG}|{_VERBAL}|\s*)
        (?P<value>\d{{2}}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])[1-8]\d{{6}}){_NUM_END}""",
            re.IGNORECASE,
        ),
    ),
    Detector("card", _rx(rf"(?<![0-9A-Za-z.,+])(?:\d[{_DASH}\ .]?){{12,18}}\d{_NUM_END}"), _card),
    Detector(
        "phone",
        _rx(rf"""{_NUM_START}
        (?:(?:\+\s?|00)?82\)?{_SEP}?(?:\(0\)\s?)?0?1[016789]|\(01[016789]\)|01[016789])
        {_SEP}?\d{{3,4}}{_SEP}?\d{{4}}(?![0-9A-Za-z])"""),
    ),  # Korean mobiles
    Detector(
        "phone",
        _rx(rf"""{_NUM_START}(?:\(0(?:2|[3-6][1-5])\)\s?|0(?:2|[3-6][1-5]|70){_SEP})
        \d{{3,4}}{_SEP}\d{{4}}{_NUM_END}"""),
    ),  # Korean landlines
    Detector(
        "phone", _rx(rf"""{_NUM_START}\+[1-9]\d{{0,2}}\)?(?:{_SEP}?(?:\(\d{{1,4}}\)|\d{{2,12}}+)){{1,6}}{_NUM_END}"""), _phone_digits(8, 15)
    ),  # E.164, any country
    Detector(
        "phone",
        _rx(rf"""{_NUM_START}(?:1[\ .{_DASH}])?
        (?:\([2-9]\d{{2}}\)\s?\d{{3}}[\s.{_DASH}]\d{{4}}|[2-9]\d{{2}}([.{_DASH}])\d{{3}}\1\d{{4}}){_NUM_END}"""),
    ),  # US
)


def redact_pii(text: str) -> str:
    """Normalise, then mask every class in DETECTORS (see docs/privacy.md). Irreversible."""
    text = normalise(text)
    seen: dict[str, str] = {}
    for detector in DETECTORS:
        text = detector.apply(text, seen)
    return _mask_repeats(text, seen)


def _mask_repeats(text: str, seen: dict[str, str]) -> str:
    """A value found after a label is masked wherever else it appears (`pw is x7 ... x7 again`)."""
    for value, placeholder in sorted(seen.items(), key=lambda item: -len(item[0])):
        if len(value) >= MIN_REPEAT_CHARS and value.lower() not in _STOPWORDS:
            text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])", placeholder, text)
    return text
