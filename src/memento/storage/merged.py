"""Where a merged-away memory went: read from the version trails, never from a table of its own.

A merge (001 §6.2 consolidation, an evaluator's merge proposal) archives the absorbed memory's
text in the survivor's version trail with the note `merged:<absorbed id>` (and ` (source …)`
when it had one); when the survivor is itself absorbed later, its trail is copied along as
`from <survivor>: merged:<absorbed id>`. So the trail that holds a `merged:<id>` note is where
the memory's text lives now, and erasure, which removes those versions (docs/erasure.md), removes
the trace with them: nothing extra to forget.

Both backends find such versions with one scan of the trails that a substring test narrows
(`MERGED` in the note), whatever the number of ids asked about; the notes are then read here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

MERGED = "merged:"
EXPLAINED = 10  # ids one error is explained for (a call may name hundreds; the scan is the same)

_NAMED = re.compile(rf"{re.escape(MERGED)}([^\s()]+)")


def merged_ids(note: str | None) -> list[str]:
    """The ids whose merged text a version note archives (directly, `merged:X` or `merged:X
    (source …)`, or carried along a later merge, `from Y: merged:X`)."""
    return _NAMED.findall(note or "")


def absorbed_into(ids: Sequence[str], versions: Iterable[tuple[str | None, str, int]]) -> dict[str, str]:
    """{absorbed id: the memory whose trail holds its text} for the `ids` named in `versions`
    ((note, fragment id, version id) rows of visible memories); the newest version wins when
    several do."""
    wanted = set(ids)
    found: dict[str, tuple[int, str]] = {}
    for note, fragment_id, version_id in versions:
        for absorbed in merged_ids(note):
            if absorbed in wanted and absorbed != fragment_id and version_id >= found.get(absorbed, (-1, ""))[0]:
                found[absorbed] = (version_id, fragment_id)
    return {absorbed: fragment_id for absorbed, (_, fragment_id) in found.items()}


def merged_from(note: str | None, named: set[str]) -> str | None:
    """The first of `named` whose merged text the note archives, if any."""
    return next((i for i in merged_ids(note) if i in named), None)
