"""Seed 003's identity crystal: a first-person snapshot of who the agent is, kept as a history of
snapshots (every one is kept; the latest is the crystal), written by the agent
(`memento_identity_update`) or crystallized from its records (`memento_identity_crystallize`:
a language model's prose when one is available, else an extractive draft; crystal.py). The
`session_start` prompt injects the latest one (mcp/prompts.py).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from datetime import UTC
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

from pydantic import Field, Strict, StrictBool, StringConstraints

from ..errors import Conflict, InvalidArgument, Unavailable
from ..fields import OperationInput
from ..graph_results import SeedResult
from ..models import AgentScope, CallContext
from ..results import Omitted
from ..storage.protocol import IdentityStore, SearchFilter, StoredIdentity
from . import crystal
from .crystal import MAX_CRYSTAL_CHARS

if TYPE_CHECKING:
    from . import ProtocolFace

log = logging.getLogger(__name__)

Source = Literal["manual", "crystallized"]
TOP_MEMORIES = 30
SUMMARIES = 10
PREVIEW_CHARS = 200
PLACEHOLDER = (
    "No identity crystal yet in this workspace. An identity crystal is a first-person reflection — who I am, "
    "what I keep to, what I am working on — injected at session start so the next session wakes up with "
    "continuity. Write one with memento_identity_update (earned identity is best), or draft one from working "
    "memory and stored memories with memento_identity_crystallize."
)


class IdentityInput(OperationInput):
    """memento_identity takes no parameters."""


class IdentityUpdateInput(OperationInput):
    """memento_identity_update: the new crystal (stored as a new snapshot)."""

    crystal: Annotated[str, Strict(), StringConstraints(strip_whitespace=True, min_length=1)] = Field(
        description=f"The identity crystal text: first-person prose, at most {MAX_CRYSTAL_CHARS} characters."
    )


class IdentityHistoryInput(OperationInput):
    """memento_identity_history: the newest snapshots."""

    limit: Annotated[int, Strict(), Field(ge=1, le=50)] = Field(default=10, description="How many snapshots, newest first (at most 50).")
    include_text: StrictBool = Field(default=False, description="Include each snapshot's whole text (default: a preview).")


class CrystallizeInput(OperationInput):
    """memento_identity_crystallize: draft a crystal from the workspace's records."""

    dry_run: StrictBool = Field(default=False, description="Return the draft without storing it.")


class IdentitySnapshot(SeedResult):
    """One stored crystal."""

    id: str
    crystal: str
    source: Source = Field(description="manual (written by the agent) or crystallized (generated).")
    source_count: int = Field(description="How many records a crystallized snapshot was drafted from (0: manual).")
    created_at: str


class IdentityResult(SeedResult):
    """memento_identity: the latest crystal, or how to create one."""

    found: bool
    crystal: str = Field(description="The latest crystal; when none exists, how to create one.")
    id: str | None = Omitted(description="The snapshot's id.")
    source: Source | None = Omitted(description="manual or crystallized.")
    source_count: int | None = Omitted(description="Records a crystallized snapshot was drafted from.")
    created_at: str | None = Omitted(description="When it was stored.")


class HistoryEntry(SeedResult):
    id: str
    source: Source
    source_count: int
    created_at: str
    length: int = Field(description="The crystal's length in characters.")
    preview: str = Field(description="Its first characters.")
    crystal: str | None = Omitted(description="The whole text (include_text).")


class IdentityHistory(SeedResult):
    snapshots: list[HistoryEntry]
    total: int = Field(description="How many snapshots the workspace holds.")


class CrystallizeResult(SeedResult):
    crystal: str
    stored: bool = Field(description="False for a dry run.")
    drafted_by: Literal["model", "extractive"] = Field(description="A language model, or the extractive draft (no model, or it failed).")
    source_count: int
    sources: dict[str, int] = Field(description="Records used: working-memory items, top memories, session summaries.")
    id: str | None = Omitted(description="The stored snapshot's id.")
    created_at: str | None = Omitted(description="When it was stored.")


def snapshot_of(stored: StoredIdentity) -> IdentitySnapshot:
    return IdentitySnapshot(
        id=stored.id,
        crystal=stored.crystal,
        source=cast(Source, stored.source),
        source_count=stored.source_count,
        created_at=stored.created_at.astimezone(UTC).isoformat(),
    )


QUOTE_CHARS = 120  # of an erased text, looked for in crystals
MIN_QUOTE_CHARS = 12  # shorter texts are too common to tell a quote from a coincidence


class Identity:
    """The identity crystal of the caller's namespace."""

    name = "identityCrystals"  # the erasure receipt's location (ErasureParticipant)

    def __init__(self, face: ProtocolFace) -> None:
        self.face = face
        self.store = cast(IdentityStore, face.service.store)  # every backend is an AppStore (storage/protocol.py)
        face.service.erasure.add_participant(self)  # a crystal may quote a memory a hard forget erases

    def erase(self, ids: Sequence[str], texts: Sequence[str]) -> int:
        """A hard forget's participant: delete every snapshot quoting an erased memory (a crystal
        is derived from memories; an extractive draft quotes them whitespace-flattened and cut at
        MAX_LINE_CHARS, so the first QUOTE_CHARS characters of the text are looked for)."""
        needles = sorted({flat[:QUOTE_CHARS] for text in texts if len(flat := " ".join(text.split())) >= MIN_QUOTE_CHARS})
        return self.store.drop_identities_quoting(AgentScope("system"), needles) if needles else 0

    def residue(self, ids: Sequence[str]) -> int | None:
        return None  # found only by the text, which is gone once erased

    def latest(self, ctx: CallContext) -> IdentitySnapshot | None:
        """The namespace's latest crystal, if it has one."""
        stored, _ = self.store.identities(self.face.read_scope(ctx), 1)
        return snapshot_of(stored[0]) if stored else None

    def get(self, inp: IdentityInput, ctx: CallContext) -> IdentityResult:
        """memento_identity: the latest crystal, or a placeholder saying how to create one."""
        latest = self.latest(ctx)
        if latest is None:
            return IdentityResult(found=False, crystal=PLACEHOLDER)
        return IdentityResult(found=True, **latest.model_dump(exclude_none=True))

    def update(self, inp: IdentityUpdateInput, ctx: CallContext) -> IdentitySnapshot:
        """Store `inp.crystal` as the namespace's new crystal (a new snapshot; the old ones stay)."""
        return self._store(inp.crystal, "manual", 0, ctx)

    def history(self, inp: IdentityHistoryInput, ctx: CallContext) -> IdentityHistory:
        """The newest snapshots, newest first."""
        stored, total = self.store.identities(self.face.read_scope(ctx), inp.limit)
        entries = [
            HistoryEntry(
                id=s.id,
                source=cast(Source, s.source),
                source_count=s.source_count,
                created_at=s.created_at.astimezone(UTC).isoformat(),
                length=len(s.crystal),
                preview=crystal.clip(s.crystal, PREVIEW_CHARS),
                crystal=s.crystal if inp.include_text else None,
            )
            for s in stored
        ]
        return IdentityHistory(snapshots=entries, total=total)

    def crystallize(self, inp: CrystallizeInput, ctx: CallContext) -> CrystallizeResult:
        """Draft a crystal from working memory, the top memories and the session summaries: by
        the language model when there is one (and it answers), else extractively; store it as a
        `crystallized` snapshot unless `dry_run`."""
        scope = self.face.read_scope(ctx) if inp.dry_run else self.face.write_scope(ctx)
        service = self.face.service
        own = SearchFilter(owner=scope.agent_id)
        top = service.store.list_fragments(scope, own, TOP_MEMORIES)
        summaries = [
            f
            for source in crystal.SUMMARY_SOURCES
            for f in service.store.recent(scope, SearchFilter(owner=scope.agent_id, source=source), SUMMARIES)
        ]
        material = crystal.gather(self._work_items(ctx), top, summaries)
        if material.empty:
            raise Conflict(
                "nothing to crystallize from yet: this workspace has no working-memory items, memories or session summaries;"
                " nothing stored (write a crystal with memento_identity_update instead)"
            )
        text, drafted_by = self._draft(material, ctx)
        sources = {"items": material.items, "memories": material.memories, "summaries": material.summaries}
        if inp.dry_run:
            return CrystallizeResult(crystal=text, stored=False, drafted_by=drafted_by, source_count=material.source_count, sources=sources)
        stored = self._store(text, "crystallized", material.source_count, ctx)
        return CrystallizeResult(
            crystal=stored.crystal,
            stored=True,
            drafted_by=drafted_by,
            source_count=stored.source_count,
            sources=sources,
            id=stored.id,
            created_at=stored.created_at,
        )

    # ------------------------------------------------------------ helpers

    def _work_items(self, ctx: CallContext) -> list[Any]:
        """The working-memory part's active and paused items (`face.items.for_context`)."""
        return list(self.face.items.for_context(ctx))

    def _draft(self, material: crystal.Material, ctx: CallContext) -> tuple[str, Literal["model", "extractive"]]:
        complete = self.face.language_model(ctx)
        if complete is not None:
            try:
                text = crystal.by_model(complete, material)
            except Unavailable as exc:
                log.info("crystallize: the language model did not answer (%s); extractive draft", exc.message)
            else:
                if text:
                    return crystal.clip_crystal(text), "model"
        return crystal.extractive(material, self.face.service.clock()), "extractive"

    def _store(self, text: str, source: Source, source_count: int, ctx: CallContext) -> IdentitySnapshot:
        scope = self.face.write_scope(ctx)
        clean = self.face.service.factory.clean_text(text)
        if not clean:
            raise InvalidArgument("crystal: must not be empty; nothing stored")
        if len(clean) > MAX_CRYSTAL_CHARS and source == "crystallized":
            clean = crystal.clip_crystal(clean)  # masking may lengthen a draft a little
        if len(clean) > MAX_CRYSTAL_CHARS:
            raise InvalidArgument(f"crystal: at most {MAX_CRYSTAL_CHARS} characters (this one has {len(clean)}); nothing stored")
        snapshot = StoredIdentity(
            id="idn-" + secrets.token_hex(6),
            agent_id=scope.agent_id,
            crystal=clean,
            source=source,
            source_count=source_count,
            created_at=self.face.service.clock(),
        )
        return snapshot_of(self.store.add_identity(scope, snapshot))
