"""Where a merged-away memory went: read from the version trails, never from a table of its own.

A merge (001 §6.2 consolidation, an evaluator's merge proposal, an exact duplicate removed by
consolidation) archives the absorbed memory's text in the survivor's version trail with the note
`merged:<absorbed id>` (and ` (source …)` when it had one); when the survivor is itself absorbed
later, its trail is copied along as `from <survivor>: merged:<absorbed id>`. So the trail that
holds a `merged:<id>` note is where the memory's text lives now, and erasure, which removes those
versions (docs/privacy.md), removes the trace with them: nothing extra to forget.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

MERGED = "merged:"


_NAMED = re.compile(rf"{re.escape(MERGED)}([^\s()]+)")


def merged_mark(fragment_id: str) -> str:
    """What a version note holds when it archives text merged from `fragment_id`: a SQL
    substring test narrows the trail to these rows, `names_merged` then decides."""
    return f"{MERGED}{fragment_id}"


def names_merged(note: str | None, fragment_id: str) -> bool:
    """Whether a version note archives text merged from `fragment_id` (directly, `merged:X` or
    `merged:X (source …)`, or carried along a later merge, `from Y: merged:X`)."""
    return fragment_id in _NAMED.findall(note or "")


def absorbed_into(ids: Sequence[str], versions: Iterable[tuple[str | None, str, int]]) -> dict[str, str]:
    """{absorbed id: the memory whose trail holds its text} for the `ids` named in `versions`
    ((note, fragment id, version id) rows of visible memories whose note names one of them); the
    newest version wins when several do."""
    wanted = set(ids)
    found: dict[str, tuple[int, str]] = {}
    for note, fragment_id, version_id in versions:
        for absorbed in _NAMED.findall(note or ""):
            if absorbed in wanted and absorbed != fragment_id and version_id >= found.get(absorbed, (-1, ""))[0]:
                found[absorbed] = (version_id, fragment_id)
    return {absorbed: fragment_id for absorbed, (_, fragment_id) in found.items()}
