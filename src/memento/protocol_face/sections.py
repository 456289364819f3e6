"""Seed 003's legacy working-memory document: freeform markdown in named sections, five by default
(active_work, standing_decisions, skip_list, activity_log, session_notes). `memento_read` shows
the whole document (a heading per section: the defaults in their order, then the others as they
were created) or one section; `memento_update` replaces one section, creating a new one under a
valid name. docs/protocol.md "Working memory"."""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, cast

from ..errors import InvalidArgument, NotFound
from ..models import AgentScope, CallContext
from ..storage.protocol import WorkingMemoryStore
from ..storage.workmem import Section
from .workmem_models import SectionInfo, SectionOut, SectionWritten, WorkingMemoryOut, iso

if TYPE_CHECKING:
    from . import ProtocolFace

DEFAULT_SECTIONS: dict[str, str] = {
    "active_work": "Active Work",
    "standing_decisions": "Standing Decisions",
    "skip_list": "Skip List",
    "activity_log": "Activity Log",
    "session_notes": "Session Notes",
}
SECTION_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
# `items` would be hidden behind GET /v1/working-memory/items (the structured items)
RESERVED = frozenset({"items"})
MAX_SECTIONS = 50
TITLE = "# Working Memory"
UNWRITTEN = datetime.min  # the updated_at of a default section shown but never stored (a read-only caller's first read)
EMPTY = "(empty)"


def heading(section: str) -> str:
    """A section's heading: the default's, else its name in words (`project_notes`: Project Notes)."""
    return DEFAULT_SECTIONS.get(section) or section.replace("_", " ").strip().title()


def section_key(name: str) -> str:
    """The section a name means: a section name (lower snake case, at most 64 characters) or a
    default section's heading (`Active Work`, any case); InvalidArgument otherwise."""
    given = name.strip()
    for key, title in DEFAULT_SECTIONS.items():
        if given.casefold() in (key, title.casefold()):
            return key
    if given in RESERVED:
        raise InvalidArgument(f"section {given!r} is reserved (the structured items); choose another name")
    if not SECTION_NAME.fullmatch(given):
        raise InvalidArgument(
            f"section {name[:80]!r} is not a section name: lower snake case (a-z, 0-9, '_'), starting with a letter, at most 64"
            f" characters; the defaults are {', '.join(DEFAULT_SECTIONS)}"
        )
    return given


def ordered(sections: list[Section]) -> list[Section]:
    """The defaults in their order, then the others in the order they were created."""
    rank = {key: i for i, key in enumerate(DEFAULT_SECTIONS)}
    return sorted(sections, key=lambda s: rank.get(s.section, len(rank)))  # a stable sort keeps creation order


def info(section: Section) -> SectionInfo:
    written = None if section.updated_at is UNWRITTEN else iso(section.updated_at)
    return SectionInfo(section=section.section, heading=heading(section.section), updated_at=written)


def markdown(section: Section) -> str:
    return f"## {heading(section.section)}\n\n{section.content.strip() or EMPTY}"


class Sections:
    """Read and replace the caller's sections."""

    def __init__(self, face: ProtocolFace) -> None:
        self.face = face
        self.store = cast(WorkingMemoryStore, face.service.store)  # every backend is an AppStore

    def document(self, scope: AgentScope, ctx: CallContext) -> list[Section]:
        """The scope's sections, the five defaults always among them: created on the first read
        by a caller that may write, shown empty (never written) to one that may not."""
        store = self.store
        stored = store.sections(scope)
        missing = [key for key in DEFAULT_SECTIONS if key not in {s.section for s in stored}]
        if missing and not ctx.read_only:
            store.add_sections(scope, missing, self.face.service.clock())
            stored = store.sections(scope)
        known = {s.section for s in stored}
        unwritten = [Section(key, "", UNWRITTEN) for key in DEFAULT_SECTIONS if key not in known]
        return ordered(stored + unwritten)

    def read(self, section: str | None, ctx: CallContext) -> WorkingMemoryOut:
        """The whole document as markdown, or one section of it."""
        key = None if section is None else section_key(section)
        scope = self.face.read_scope(ctx)
        sections = self.document(scope, ctx)
        if key is not None:
            one = self._find(sections, key)
            return WorkingMemoryOut(markdown=markdown(one), sections=[info(one)])
        text = "\n\n".join([TITLE, *(markdown(s) for s in sections)])
        return WorkingMemoryOut(markdown=text, sections=[info(s) for s in sections])

    def section(self, section: str, ctx: CallContext) -> SectionOut:
        """One section with its raw content (GET /v1/working-memory/{section})."""
        key = section_key(section)
        one = self._find(self.document(self.face.read_scope(ctx), ctx), key)
        found = info(one)
        return SectionOut(section=found.section, heading=found.heading, updated_at=found.updated_at, content=one.content)

    def update(self, section: str, content: str, ctx: CallContext) -> SectionWritten:
        """Replace a section's content (a new, valid name creates the section)."""
        key = section_key(section)
        scope = self.face.write_scope(ctx)
        written, created = self.store.put_section(scope, key, content, self.face.service.clock(), MAX_SECTIONS)
        return SectionWritten(section=key, heading=heading(key), updated_at=iso(written.updated_at), created=created, chars=len(content))

    @staticmethod
    def _find(sections: list[Section], key: str) -> Section:
        for s in sections:
            if s.section == key:
                return s
        raise NotFound(f"section {key!r} not found in working memory; sections: {', '.join(s.section for s in sections)}")
