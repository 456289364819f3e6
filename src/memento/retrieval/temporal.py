"""Time named in a query ("in May", "on 3 June, 2023", "last week", "지난달"), as a span of days.

A recall that names a time prefers memories created within it: their relevance is multiplied
by 1 + MEMORY_CONFIG.ranking.temporalBoost (retrieval/recall.py). The span runs on for
temporalSlackDays after the named time, because a memory is usually written down after what it
tells of ("we went camping last week" is stored the week after the trip). Nothing is filtered
out: a query whose time matches no memory ranks as without it.

Understood, in English and Korean: a full date (3 June 2023, June 3, 2023, 2023-06-03,
2023년 6월 3일), a month with or without a year (May 2023, in May, 2023년 5월, 5월), a year
(in 2022, 2022년), and spans relative to the recall's clock (today, yesterday, last/this
week, weekend, month, year, N days/weeks/months ago; 오늘, 어제, 그저께, 지난주, 이번 주, 지난달,
이번 달, 작년, 올해). A month without a year is the latest such month not after now. The first
expression wins; between equally narrow ones, the more explicit (a month with its year over the
month alone).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
MONTHS["sept"] = 9
_MONTH = r"(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_YEAR = r"((?:19|20)\d\d)"
_UNITS = {"day": 1, "days": 1, "week": 7, "weeks": 7, "month": 30, "months": 30, "year": 365, "years": 365}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}


@dataclass(frozen=True)
class Span:
    """The days a query names, first and last inclusive."""

    first: date
    last: date

    def holds(self, moment: datetime, slack_days: float) -> bool:
        day = moment.date()
        return self.first <= day <= self.last + timedelta(days=slack_days)


def _month_span(year: int, month: int) -> Span:
    return Span(date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1]))


def _latest_month(month: int, today: date) -> Span:
    year = today.year if month <= today.month else today.year - 1
    return _month_span(year, month)


def _day(year: int, month: int, day: int) -> Span | None:
    try:
        d = date(year, month, day)
    except ValueError:
        return None
    return Span(d, d)


def _week_of(day: date) -> Span:
    start = day - timedelta(days=day.weekday())
    return Span(start, start + timedelta(days=6))


_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"), "iso"),
    (re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+" + _MONTH + r",?\s+" + _YEAR + r"\b", re.I), "d m y"),
    (re.compile(r"\b" + _MONTH + r"\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+" + _YEAR + r"\b", re.I), "m d y"),
    (re.compile(_YEAR + r"\s*년\s*(\d{1,2})\s*월\s*(\d{1,2})\s*일"), "ko y m d"),
    (re.compile(_YEAR + r"\s*년\s*(\d{1,2})\s*월"), "ko y m"),
    (re.compile(r"\b" + _MONTH + r",?\s+" + _YEAR + r"\b", re.I), "m y"),
    (re.compile(r"\b(?:in|during|of|since|before|after|early|late|mid)\s+(?:early\s+|late\s+|mid-?\s*)?" + _MONTH + r"(?!\w)", re.I), "m"),
    (re.compile(r"(?<!\d)(\d{1,2})\s*월(?!\s*\d)"), "ko m"),
    (re.compile(r"\b(?:in|during|of)\s+" + _YEAR + r"\b", re.I), "y"),
    (re.compile(_YEAR + r"\s*년"), "y"),
    (re.compile(r"\b(today|tonight|this morning|this evening)\b|오늘", re.I), "today"),
    (re.compile(r"\byesterday\b|어제", re.I), "yesterday"),
    (re.compile(r"그저께|그제"), "2 days ago"),
    (re.compile(r"\b(a|an|one|two|three|four|five|six|seven|eight|nine|ten|\d{1,2})\s+(days?|weeks?|months?|years?)\s+ago\b", re.I), "ago"),
    (re.compile(r"\blast\s+weekend\b|지난\s*주말", re.I), "last weekend"),
    (re.compile(r"\blast\s+week\b|지난\s*주", re.I), "last week"),
    (re.compile(r"\bthis\s+week\b|이번\s*주", re.I), "this week"),
    (re.compile(r"\blast\s+month\b|지난\s*달", re.I), "last month"),
    (re.compile(r"\bthis\s+month\b|이번\s*달", re.I), "this month"),
    (re.compile(r"\blast\s+year\b|작년|지난\s*해", re.I), "last year"),
    (re.compile(r"\bthis\s+year\b|올해|금년", re.I), "this year"),
]


def named_span(query: str, now: datetime) -> Span | None:
    """The span of days `query` names, relative to `now`; None when it names no time."""
    today = now.date()
    found: list[tuple[int, Span]] = []
    for order, (pattern, kind) in enumerate(_PATTERNS):
        m = pattern.search(query)
        if m is None:
            continue
        span = _span(kind, m, today)
        if span is not None:
            found.append((order, span))
            if kind in ("iso", "d m y", "m d y", "ko y m d"):
                break  # a full date is as precise as a query gets
    if not found:
        return None
    return min(found, key=lambda t: (t[1].last - t[1].first, t[0]))[1]


def _span(kind: str, m: re.Match[str], today: date) -> Span | None:
    g = m.groups()
    if kind == "iso":
        return _day(int(g[0]), int(g[1]), int(g[2]))
    if kind == "d m y":
        return _day(int(g[2]), MONTHS[g[1].lower()], int(g[0]))
    if kind == "m d y":
        return _day(int(g[2]), MONTHS[g[0].lower()], int(g[1]))
    if kind == "ko y m d":
        return _day(int(g[0]), int(g[1]), int(g[2])) if 1 <= int(g[1]) <= 12 else None
    if kind == "ko y m":
        return _month_span(int(g[0]), int(g[1])) if 1 <= int(g[1]) <= 12 else None
    if kind == "m y":
        return _month_span(int(g[1]), MONTHS[g[0].lower()])
    if kind == "m":
        return _latest_month(MONTHS[g[0].lower()], today)
    if kind == "ko m":
        return _latest_month(int(g[0]), today) if 1 <= int(g[0]) <= 12 else None
    if kind == "y":
        year = int(g[0])
        return Span(date(year, 1, 1), date(year, 12, 31))
    if kind == "today":
        return Span(today, today)
    if kind == "yesterday":
        return Span(today - timedelta(days=1), today - timedelta(days=1))
    if kind == "2 days ago":
        return Span(today - timedelta(days=2), today - timedelta(days=2))
    if kind == "ago":
        count = _NUMBERS.get(g[0].lower()) or int(g[0])
        unit = _UNITS[g[1].lower()]
        centre = today - timedelta(days=count * unit)
        half = max(0, unit // 2) if unit > 1 else 0
        return Span(centre - timedelta(days=half), centre + timedelta(days=half))
    if kind == "last weekend":
        saturday = today - timedelta(days=(today.weekday() - 5) % 7 or 7)
        return Span(saturday, saturday + timedelta(days=1))
    if kind == "last week":
        return _week_of(today - timedelta(days=7))
    if kind == "this week":
        return _week_of(today)
    if kind == "last month":
        first = today.replace(day=1) - timedelta(days=1)
        return _month_span(first.year, first.month)
    if kind == "this month":
        return _month_span(today.year, today.month)
    if kind == "last year":
        return Span(date(today.year - 1, 1, 1), date(today.year - 1, 12, 31))
    if kind == "this year":
        return Span(date(today.year, 1, 1), date(today.year, 12, 31))
    return None
