"""The consolidation pipeline as a whole (issue 13): a run limited to stages, the dry run (a
rehearsal rolled back: it reports exactly what the real run then does and changes nothing) and
001 §6.2's cluster merge as the `merged` stage. Both backends."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

import numpy as np
import pytest
from conftest import Clock
from pydantic.alias_generators import to_camel
from test_lifecycle import duplicates_allowed

from memento.app import App, build_app
from memento.embeddings.hashing import HashEmbedder
from memento.embeddings.protocol import EmbeddingFailed
from memento.errors import InvalidArgument
from memento.lifecycle.consolidate import DEFAULT_ID_LIMIT, STAGES
from memento.lifecycle.merge import names_apart
from memento.models import AgentScope, CallContext, ConsolidateInput, ForgetInput, LinkInput, RecallInput, RememberInput
from memento.results import ConsolidateResult
from memento.service import MemoryService
from memento.settings import Settings
from memento.storage.protocol import BULK_TABLES, AppStore

pytestmark = pytest.mark.backends("sqlite", "postgres")

SYSTEM = AgentScope("system")
MERGE_A = "React hooks let function components keep state"
MERGE_B = "React hooks let function components keep state!"


class SwitchableEmbedder:
    """The hash embedder, which can be down; counts the passages it was asked to embed."""

    def __init__(self) -> None:
        self.inner = HashEmbedder(256)
        self.name = self.inner.name
        self.dimensions = self.inner.dimensions
        self.down = False
        self.passages = 0

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if self.down:
            raise EmbeddingFailed("provider unreachable")
        self.passages += len(texts)
        return self.inner.embed_passages(texts)

    def embed_query(self, text: str) -> np.ndarray:
        if self.down:
            raise EmbeddingFailed("provider unreachable")
        return self.inner.embed_query(text)


@pytest.fixture
def embedder() -> SwitchableEmbedder:
    return SwitchableEmbedder()


@pytest.fixture
def app(settings: Settings, clock: Clock, embedder: SwitchableEmbedder) -> Iterator[App]:
    built = build_app(settings, embedder=embedder, clock=clock)
    if built.keyword_index is not None:
        assert built.keyword_index.wait_ready()
    yield built
    built.close()


def remember(service: MemoryService, content: str, ctx: CallContext | None = None, **kw: Any) -> str:
    payload = {"topic": "t", "type": "fact", **kw, "content": content}
    return str(service.remember(RememberInput.model_validate(payload), ctx or CallContext()).id)


def consolidate(service: MemoryService, **kw: Any) -> ConsolidateResult:
    return service.memory_consolidate(ConsolidateInput.model_validate(kw), CallContext())


def dump(store: object) -> dict[str, list[dict[str, object]]]:
    """Every row of every table a whole-store copy moves (fragments with their vectors)."""
    bulk = cast(AppStore, store)

    def plain(v: object) -> object:
        return v.tolist() if isinstance(v, np.ndarray) else v

    return {table: [{k: plain(v) for k, v in row.items()} for row in bulk.export_rows(table, -1, 1_000_000)] for table in BULK_TABLES}


def comparable(result: ConsolidateResult) -> dict[str, object]:
    """What a dry run and the real run must agree on: the stages, each count and each id list
    (the statistics differ by design: a dry run embeds nothing)."""
    out = result.dump()
    for key in ("dryRun", "elapsedMs", "statistics"):
        out.pop(key)
    return out


def busy_store(service: MemoryService, clock: Clock, embedder: SwitchableEmbedder) -> dict[str, str]:
    """A store in which every stage has work on day 95 (the clock's start is day 0)."""
    start = clock.now

    def at(day: int) -> datetime:
        return start + timedelta(days=day)

    ids: dict[str, str] = {}
    ids["episode"] = remember(service, "the launch-day story", type="episode")  # retention: 90 days
    clock.now = at(30)
    ids["cold"] = remember(service, "a cold fact about the old office", importance=0.3)  # expires after 60 cold days
    clock.now = at(50)
    ids["forgotten"] = remember(service, "a note forgotten on day 50")
    service.forget(ForgetInput(id=ids["forgotten"]), CallContext())  # purged 30 days later
    clock.now = at(60)
    ids["warm"] = remember(service, "a warm fact nobody recalls", importance=0.6)  # warm → cold after 30 days
    clock.now = at(80)
    ids["hot"] = remember(service, "procedure: restart the worker", type="procedure", importance=0.6)  # hot → warm after 7
    clock.now = at(90)
    session = CallContext(session_id="s-1")
    ids["working"] = remember(service, "scratch for the session", session, scope="session", sessionId="s-1")
    clock.now = at(94)
    ids["unsure"] = remember(service, "an unsure guess", importance=0.6, record={"confidence": 0.04})  # below the floor
    ids["merge_a"] = remember(service, MERGE_A, type="observation")
    clock.now += timedelta(minutes=1)
    ids["merge_b"] = remember(service, MERGE_B, type="observation")
    ids["dup_a"] = remember(service, "the harbour gate code is 4417 (copy one)")
    ids["dup_b"] = remember(service, "the harbour gate code is 4417 (copy two)")
    ids["opens_8"] = remember(service, "the office opens at 8")
    ids["opens_9"] = remember(service, "the office opens at 9")
    service.link(LinkInput(fromId=ids["opens_8"], toId=ids["opens_9"], relationType="contradicts"), CallContext())
    ids["linker"] = remember(service, "a note linked to one that goes")
    ids["gone"] = remember(service, "a note removed behind the store's back")
    service.link(LinkInput(fromId=ids["linker"], toId=ids["gone"], relationType="related"), CallContext())
    # two recent episodes saying the same thing differently: sleep consolidation's cluster (004 §4.3)
    ids["episode_a"] = remember(
        service, "Standup: the deploy script needs the VPN to reach the build server. We retried twice.", type="episode"
    )
    ids["episode_b"] = remember(
        service, "Friday release: the deploy script needs the VPN to reach the build server. Alice fixed the config.", type="episode"
    )
    assert service.settle()  # the embedding worker stored every vector so far
    service.outbox.stop(0)  # then it is gone (as after a crash): the consolidation's backfill stage embeds what follows
    embedder.down = True
    ids["unembedded"] = remember(service, "stored while the provider was down")
    embedder.down = False
    clock.now = at(95)
    return ids


def test_a_dry_run_reports_exactly_what_the_real_run_does_and_changes_nothing(
    service: MemoryService, settings: Settings, clock: Clock, embedder: SwitchableEmbedder, request: pytest.FixtureRequest
) -> None:
    ids = busy_store(service, clock, embedder)
    store = service.store
    with duplicates_allowed(settings, request) as run:
        run("UPDATE {fragments} SET content_hash = 'same-hash' WHERE id IN ({ids})", [ids["dup_a"], ids["dup_b"]])
        run("DELETE FROM {fragments} WHERE id IN ({ids})", [ids["gone"]])  # leaves the linker's link dangling
        store.flush_access()
        before = dump(store)
        calls = embedder.passages
        events: list[object] = []
        service.add_listener(events.append)
        dry = consolidate(service, dryRun=True)
        assert dump(store) == before  # not one row changed
        assert embedder.passages == calls and events == []  # the provider not called, nothing announced
        assert dry.dry_run and dry.stages == [to_camel(s) for s in STAGES]
        real = consolidate(service)
    assert not real.dry_run and events  # the real run announces itself
    assert comparable(dry) == comparable(real)
    done = real.dump()
    for stage in STAGES:  # every stage had work
        assert done[to_camel(stage)] >= 1, (stage, done)
    expected = {
        "confidencePruned": ids["unsure"],
        "hotToWarm": ids["hot"],
        "warmToCold": ids["warm"],
        "expired": ids["cold"],
        "retentionExpired": ids["episode"],
        "deduplicated": ids["dup_b"],
        "merged": ids["merge_b"],
        "forgottenPurged": ids["forgotten"],
        "orphanLinksPruned": f"{ids['linker']}>{ids['gone']}",
        "embeddingsBackfilled": ids["unembedded"],
        "workingMemoryExpired": ids["working"],
    }
    for stage, fid in expected.items():
        assert fid in real.changed[stage].ids, (stage, real.changed[stage])
    assert real.contradiction_pairs is not None and [(p.from_id, p.to_id) for p in real.contradiction_pairs] == [
        (ids["opens_8"], ids["opens_9"])
    ]


def test_ids_are_capped_per_stage_with_a_truncated_flag(service: MemoryService, clock: Clock) -> None:
    for n in range(DEFAULT_ID_LIMIT + 3):
        remember(service, f"procedure {n}: restart worker {n}", type="procedure", importance=0.6)
    clock.now += timedelta(days=8)
    dry = consolidate(service, dryRun=True, stages=["hotToWarm"])
    real = consolidate(service, stages=["hotToWarm"])
    assert dry.hot_to_warm == real.hot_to_warm == DEFAULT_ID_LIMIT + 3
    assert dry.changed["hotToWarm"] == real.changed["hotToWarm"]
    listed = real.changed["hotToWarm"].ids
    assert len(listed) == DEFAULT_ID_LIMIT and listed == sorted(listed) and real.changed["hotToWarm"].truncated


def test_a_run_limited_to_stages_reports_the_others_as_null(service: MemoryService, clock: Clock) -> None:
    hot = remember(service, "procedure: rotate the keys", type="procedure", importance=0.6)
    clock.now += timedelta(days=8)
    result = consolidate(service, stages=["hot_to_warm", "utilityRecomputed"])  # either spelling
    assert result.stages == ["hotToWarm", "utilityRecomputed"]  # pipeline order, camelCase
    wire = result.dump()
    assert wire["hotToWarm"] == 1 and result.changed["hotToWarm"].ids == [hot]
    for other in ("warmToCold", "expired", "decayed", "merged", "contradictions", "contradictionPairs", "embeddingsBackfilled"):
        assert wire[other] is None, other  # not run: null, never a misleading 0
    assert set(result.changed) == {"hotToWarm", "utilityRecomputed"}


def test_an_unknown_stage_is_refused_listing_the_known_ones_and_nothing_runs(service: MemoryService, clock: Clock) -> None:
    hot = remember(service, "procedure: rotate the keys", type="procedure", importance=0.6)
    clock.now += timedelta(days=8)
    with pytest.raises(InvalidArgument) as refused:
        consolidate(service, stages=["hotToWarm", "compact"])
    assert "'compact'" in str(refused.value) and "hotToWarm" in str(refused.value) and "merged" in str(refused.value)
    assert service.store.get_many(SYSTEM, [hot])[0].ttl_tier.value == "hot"  # hotToWarm did not run either
    with pytest.raises(InvalidArgument):
        consolidate(service, stages=[])  # an empty list is not "all"


def test_access_statistics_are_flushed_before_a_limited_run(service: MemoryService, clock: Clock) -> None:
    warm = remember(service, "the billing queue drains at night", importance=0.6)
    clock.now += timedelta(days=31)
    service.recall(RecallInput(text="billing queue"), CallContext())  # buffered, not flushed by the test
    assert consolidate(service, stages=["warmToCold"]).warm_to_cold == 0
    assert consolidate(service, dryRun=True, stages=["warmToCold"]).warm_to_cold == 0
    assert service.store.get_many(SYSTEM, [warm])[0].ttl_tier.value == "warm"


# ---------------------------------------------------------------- 001 §6.2 as the `merged` stage


def versions_text(service: MemoryService, fid: str) -> list[str]:
    return [str(v["content"]) for v in service.store.versions(SYSTEM, fid)]


def test_the_merged_stage_absorbs_clusters_into_the_primary_version_trail(service: MemoryService, clock: Clock) -> None:
    primary = remember(service, MERGE_A, type="observation", tags=["react"])
    clock.now += timedelta(minutes=1)
    absorbed = remember(service, MERGE_B, type="observation", tags=["hooks"])
    pinned = remember(service, MERGE_A + "!!", type="observation", record={"pinned": True})
    other_type = remember(service, MERGE_A + "?", type="decision")
    result = consolidate(service, stages=["merged"])
    assert result.merged == 1 and result.changed["merged"].ids == [absorbed]
    assert {f.id for f in service.store.get_many(SYSTEM, [primary, absorbed, pinned, other_type])} == {primary, pinned, other_type}
    assert MERGE_B in versions_text(service, primary)  # nothing's text is lost
    kept = service.store.get_many(SYSTEM, [primary])[0]
    assert set(kept.tags) == {"react", "hooks"}
    clock.now += timedelta(days=3)
    # The next run absorbs the primary into the pinned copy (a pinned memory is never absorbed,
    # but may be a primary): the primary's own trail moves with it, so no text is lost.
    assert consolidate(service).changed["merged"].ids == [primary]
    trail = versions_text(service, pinned)
    assert MERGE_A in trail and MERGE_B in trail


def test_memories_without_a_stored_vector_are_never_merged(service: MemoryService, embedder: SwitchableEmbedder) -> None:
    remember(service, MERGE_A, type="observation")
    assert service.settle()
    service.outbox.stop(0)  # no embedding worker from here on: MERGE_B keeps no vector
    embedder.down = True
    remember(service, MERGE_B, type="observation")
    embedder.down = False
    calls = embedder.passages
    assert consolidate(service, stages=["merged"]).merged == 0  # skipped, not embedded to compare
    assert embedder.passages == calls


def test_merging_never_crosses_namespaces(service: MemoryService) -> None:
    remember(service, MERGE_A, type="observation", agentId="alice")
    remember(service, MERGE_B, type="observation", agentId="bob")
    assert consolidate(service, stages=["merged"]).merged == 0  # the operator's whole-store run


def test_merge_on_consolidate_false_leaves_merging_to_an_explicit_request(settings: Settings, clock: Clock) -> None:
    app = build_app(settings.model_copy(update={"merge_on_consolidate": False}), embedder=HashEmbedder(256), clock=clock)
    try:
        service = app.service
        remember(service, MERGE_A, type="observation")
        remember(service, MERGE_B, type="observation")
        default = consolidate(service)
        assert default.merged is None and "merged" not in default.stages
        assert consolidate(service, stages=["merged"]).merged == 1
    finally:
        app.close()


def test_the_tool_and_the_stage_find_the_same_clusters(service: MemoryService, clock: Clock) -> None:
    from memento.graph_inputs import ConsolidateMemoriesInput

    primary = remember(service, MERGE_A, type="observation")
    clock.now += timedelta(minutes=1)
    absorbed = remember(service, MERGE_B, type="observation")
    report = service.entities.consolidate_memories(ConsolidateMemoriesInput(dry_run=True), CallContext())
    dry = consolidate(service, dryRun=True, stages=["merged"])
    assert [(c.primary_id, c.absorbed_ids) for c in report.clusters] == [(primary, [absorbed])]
    assert dry.changed["merged"].ids == [absorbed]


def test_cli_consolidate_takes_stages_and_dry_run(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from memento.cli import main

    if settings.backend != "sqlite":
        pytest.skip("the CLI face is the same on both backends")
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hash")
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{settings.sqlite_path}")
    assert main(["consolidate", "--stages", "merged,hotToWarm", "--dry-run"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dryRun"] is True and out["stages"] == ["hotToWarm", "merged"] and out["expired"] is None
    assert main(["consolidate", "--stages", "compact"]) != 0
    assert "known:" in capsys.readouterr().err


def test_near_identical_texts_about_different_people_are_never_merged(service: MemoryService) -> None:
    """An unattended merge must not fold two facts into one: names, like numbers, keep them apart."""
    alice = remember(service, "Alice owns the billing service rollout", type="observation")
    bob = remember(service, "Bob owns the billing service rollout", type="observation")
    same = remember(service, "The billing service rollout is owned by Alice", type="observation")
    assert not names_apart("The billing rollout, by Alice", "Alice: billing rollout")  # an opener is no name
    assert not names_apart("The staging database", "Staging database")  # a capital that starts a sentence
    assert names_apart("Alice owns the billing service rollout", "Bob owns the billing service rollout")
    merge = service.consolidator.merge
    assert merge is not None and service.settle()  # the clusters read the stored vectors
    clusters = merge.merger.clusters(AgentScope("system"), -1.0)  # any similarity: only the rules decide
    groups = [{c.primary.id, *c.absorbed_ids} for c in clusters]
    assert {alice, same} in groups  # the same person: merged
    assert not any({alice, bob} <= g or {bob, same} <= g for g in groups)  # another person: never
