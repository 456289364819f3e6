"""004 §5.1 `forget` mode=hard, the right to erasure, and `verify_erasure` (docs/erasure.md).

An erasure runs in two parts. In one store transaction: the memories' rows, full-text entries,
vectors, version trails, links and entity associations, the text merged from them into other
memories' trails, the references derived memories hold, and the receipt. After the commit: the
store's physical clean-up (`ErasureStore.scrub`) and every participant outside the store that may
hold a copy of the text (the Redis keyword index, the live-event rings); the receipt is then
stored again with the final counts. The receipt never holds the text: `contentDigest` is a
SHA-256 over the erased texts and `digest` a SHA-256 over the receipt's canonical JSON.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from .analysis import content_hash
from .errors import InvalidArgument, NotFound
from .models import AgentScope, VerifyErasureInput
from .results import DerivedMemory, ErasureCheck, ErasureReceipt, VerifyErasureResult
from .storage.protocol import ErasureStore, ErasureTargets, StoredReceipt

log = logging.getLogger(__name__)


class ErasureParticipant(Protocol):
    """A place outside the store that may hold an erased memory's text or id (a Redis index, an
    event ring): cleaned after the commit, checked by verify_erasure."""

    name: str  # the receipt's location and the verify check, e.g. "redis"

    def erase(self, ids: Sequence[str], texts: Sequence[str]) -> int:
        """Remove what this place holds of these memories (named by id, or quoting one of
        `texts`, which exist only in memory for this call); how many entries."""
        ...

    def residue(self, ids: Sequence[str]) -> int | None:
        """How many entries of these memories it still holds (0 once erased); None when it can
        tell only by the text, which is gone by then (the check is left out)."""
        ...


def canonical(value: Any) -> str:
    """The canonical JSON of a receipt: sorted keys, no spaces, UTF-8 kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def receipt_digest(receipt: dict[str, Any]) -> str:
    """SHA-256 over the canonical JSON of the receipt without its `digest`."""
    body = {k: v for k, v in receipt.items() if k != "digest"}
    return "sha256:" + hashlib.sha256(canonical(body).encode("utf-8")).hexdigest()


def content_digest(texts: Sequence[str]) -> str:
    """SHA-256 over the canonical JSON of the erased texts, sorted (their order is no part of it)."""
    return "sha256:" + hashlib.sha256(canonical(sorted(texts)).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Erased:
    """What one erasure removed, for its receipt."""

    targets: ErasureTargets
    counts: dict[str, int]

    @property
    def memory_ids(self) -> list[str]:
        """The erased memories, and the ids whose merged text was all that was left of them."""
        return list(dict.fromkeys([*self.targets.ids, *(v.merged_from for v in self.targets.versions if v.merged_from)]))

    def texts(self) -> list[str]:
        found = [t for f in self.targets.fragments for t in (f.content, f.detail) if t is not None]
        return found + [v.content for v in self.targets.versions]

    def hashes(self) -> tuple[str, ...]:
        hashes = [f.content_hash for f in self.targets.fragments] + [content_hash(v.content) for v in self.targets.versions]
        return tuple(dict.fromkeys(hashes))

    def derived(self) -> list[DerivedMemory]:
        merged = dict.fromkeys(v.fragment_id for v in self.targets.versions if v.merged_from)
        return [DerivedMemory(id=i, action="merged text removed") for i in merged] + [
            DerivedMemory(id=f.id, action="reference removed") for f in self.targets.derived if f.id not in merged
        ]


class Erasure:
    """Hard erasure and its verification over an ErasureStore and the participants outside it."""

    def __init__(self, store: ErasureStore, backend: str, clock: Callable[[], datetime]) -> None:
        self.store = store
        self.backend = backend
        self.clock = clock
        self.participants: list[ErasureParticipant] = []

    def add_participant(self, participant: ErasureParticipant) -> None:
        """Clean `participant` after every erasure and check it in every verification."""
        self.participants.append(participant)

    def receipt(self, agent_id: str, erased: Erased) -> tuple[ErasureReceipt, StoredReceipt]:
        """The receipt of an erasure (in its transaction, with the store's counts so far)."""
        now = self.clock()
        body: dict[str, Any] = {
            "receiptId": "erasure-" + secrets.token_hex(8),
            "agentId": agent_id,
            "erasedAt": now.isoformat(),
            "memoryIds": erased.memory_ids,
            "derived": [d.dump() for d in erased.derived()],
            "locations": dict(erased.counts),
            "backend": self.backend,
            "contentDigest": content_digest(erased.texts()),
        }
        return self._sealed(body, now, erased.hashes(), tuple(f.seq for f in erased.targets.fragments))

    @staticmethod
    def _sealed(
        body: dict[str, Any], erased_at: datetime, hashes: tuple[str, ...], seqs: tuple[int, ...]
    ) -> tuple[ErasureReceipt, StoredReceipt]:
        body = {**body, "digest": receipt_digest(body)}
        stored = StoredReceipt(body["receiptId"], body["agentId"], erased_at, canonical(body), body["digest"], hashes, seqs)
        return ErasureReceipt.model_validate(body), stored

    def finish(self, receipt: ErasureReceipt, stored: StoredReceipt, agents: Sequence[str], texts: Sequence[str]) -> ErasureReceipt:
        """After the commit: the store's physical clean-up and the participants'; the receipt,
        with their counts, stored again and returned. A failure here leaves the committed
        erasure and its first receipt in place (and is logged): the text is already gone from
        every row, only a copy outside may linger until its own expiry."""
        locations = dict(receipt.locations)
        try:
            locations.update(self.store.scrub(agents))
        except Exception:  # boundary: the rows are erased and committed whatever happens here
            log.exception("the physical clean-up after erasure %s failed", receipt.receipt_id)
        ids = receipt.memory_ids
        for participant in self.participants:
            try:
                locations[participant.name] = participant.erase(ids, texts)
            except Exception:  # boundary: one place failing must not hide the others' counts
                log.exception("erasure %s: cleaning %s failed", receipt.receipt_id, participant.name)
                locations[participant.name] = -1
        body = {k: v for k, v in receipt.dump().items() if k != "digest"} | {"locations": locations}
        final, again = self._sealed(body, stored.erased_at, stored.content_hashes, stored.memory_seqs)
        self.store.save_receipt(again)
        return final

    def verify(self, scope: AgentScope, inp: VerifyErasureInput) -> VerifyErasureResult:
        """Recompute the digest, find the receipt on file for this agent, and look for what is left."""
        if (inp.receipt is None) == (inp.receiptId is None):
            raise InvalidArgument("give exactly one of 'receipt' or 'receiptId'")
        given = inp.receipt
        receipt_id = inp.receiptId if given is None else given.get("receiptId")
        if not isinstance(receipt_id, str) or not receipt_id:
            raise InvalidArgument("receipt: it has no receiptId")
        stored = self.store.get_receipt(scope, receipt_id)
        if given is None and stored is None:
            raise NotFound(f"erasure receipt {receipt_id!r} not found")
        checks: list[ErasureCheck] = []
        document = given if given is not None else json.loads(stored.receipt) if stored else {}
        ok = document.get("digest") == receipt_digest(document)
        checks.append(ErasureCheck(name="digest", ok=ok, detail="matches the receipt's contents" if ok else "does not match: altered"))
        on_file = stored is not None and stored.receipt == canonical(document)
        detail = "the same receipt is on file for this agent" if on_file else "no such receipt on file for this agent"
        checks.append(ErasureCheck(name="onFile", ok=on_file, detail=detail))
        if stored is not None and on_file:  # look only for what this agent's own receipt names
            ids = [str(i) for i in json.loads(stored.receipt).get("memoryIds", [])]
            for name, left in self.store.erasure_residue(scope, stored, ids).items():
                checks.append(ErasureCheck(name=name, ok=left == 0, detail=f"{left} left" if left else "none left"))
            for participant in self.participants:
                try:
                    remaining = participant.residue(ids)
                except Exception as exc:  # noqa: BLE001 - an unreachable place is a failed check, not a failed call
                    checks.append(ErasureCheck(name=participant.name, ok=False, detail=f"could not be checked: {type(exc).__name__}"))
                    continue
                if remaining is None:
                    continue
                checks.append(
                    ErasureCheck(name=participant.name, ok=remaining == 0, detail=f"{remaining} left" if remaining else "none left")
                )
        return VerifyErasureResult(verified=all(c.ok for c in checks), receipt_id=receipt_id, checks=checks)
