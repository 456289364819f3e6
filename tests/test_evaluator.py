"""The evaluator (000 §7, issue 13): the durable queue on SQLite and PostgreSQL, the worker's
judgement through a real HTTP model server (OpenAI-compatible and Gemini), retries, back-off and
dead letters, the per-agent token budget, isolation between agents, a hanging provider that never
delays a write, and MCP sampling with the official client over stdio."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from conftest import Clock, StoreEnv
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp.client.stdio import StdioServerParameters
from mcp_helpers import SERVE, TIMEOUT_S, data, server_env
from mcp_types import CreateMessageRequestParams, CreateMessageResult, TextContent

from memento.app import App, build_app
from memento.embeddings.hashing import HashEmbedder
from memento.graph_inputs import StoreMemoryInput
from memento.lifecycle.evaluator import next_day
from memento.lifecycle.judges import InvalidAnswer, Neighbour, heuristic, parse_answer
from memento.models import AgentScope, CallContext, ConsolidateInput, MemoryStatsInput, RememberInput
from memento.protocol_face.memory_models import StoreMemoryInput as ProtocolStoreInput
from memento.settings import Settings
from memento.storage.protocol import EvaluationOutcome, SearchFilter
from memento.storage.utility import utility
from memento.vault_models import CommitMemoryInput

pytestmark = pytest.mark.backends("sqlite", "postgres")

ALICE, BOB = CallContext(agent_id="alice"), CallContext(agent_id="bob")
PORT_A = "The staging database listens on port 5432 on host db-staging.internal."
PORT_B = "The staging database listens on port 6543 on host db-staging.internal."
DEPLOY = "Always run make migrate before deploying the billing service to production."
DEPLOY_AGAIN = "Always run make migrate before deploying the billing service to production!"
PROVIDER = Path(__file__).with_name("evaluator_provider.py")


class Provider:
    """tests/evaluator_provider.py, started as its own process in one mode."""

    def __init__(self, mode: str) -> None:
        self.process = subprocess.Popen([sys.executable, str(PROVIDER), mode], stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}"

    def state(self) -> dict[str, Any]:
        state: dict[str, Any] = httpx.get(f"{self.url}/calls", timeout=10).json()
        return state

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(10)


@pytest.fixture
def provider(request: pytest.FixtureRequest) -> Iterator[Provider]:
    running = Provider(getattr(request, "param", "ok"))
    yield running
    running.stop()


@pytest.fixture
def make_app(tmp_path: Path, store_env: StoreEnv, clock: Clock) -> Iterator[Callable[..., App]]:
    built: list[App] = []

    def make(**env: str) -> App:
        settings = Settings(**store_env(tmp_path), EMBEDDING_PROVIDER="hash", **env)  # type: ignore[arg-type]
        app = build_app(settings, embedder=HashEmbedder(256), clock=clock)
        built.append(app)
        return app

    yield make
    for app in built:
        app.close()


def remember(app: App, content: str, ctx: CallContext = ALICE, type_: str = "fact") -> str:
    return app.service.remember(RememberInput.model_validate({"content": content, "topic": "ops", "type": type_}), ctx).id


def fragment(app: App, fragment_id: str, agent: str = "alice") -> Any:
    (found,) = app.store.get_many(AgentScope(agent), [fragment_id])
    return found


def stats(app: App, ctx: CallContext = ALICE) -> dict[str, Any]:
    evaluator: dict[str, Any] = app.service.memory_stats(MemoryStatsInput(), ctx).dump()["evaluator"]
    return evaluator


def evaluator(app: App) -> Any:
    assert app.evaluator is not None
    return app.evaluator


# ---------------------------------------------------------------- the queue (store contract, both backends)


def test_every_created_memory_is_queued_once_and_claimed_by_one_worker(make_app: Callable[..., App], clock: Clock) -> None:
    app = make_app()
    a, b = remember(app, PORT_A), remember(app, DEPLOY)
    remember(app, PORT_A)  # a duplicate creates nothing, queues nothing
    store = app.store
    assert store.enqueue_evaluations(AgentScope("alice"), [a, b], clock()) == 0  # already open
    assert store.enqueue_evaluations(AgentScope("bob"), [a], clock()) == 0  # not bob's memory
    assert stats(app) == {"queued": 2, "running": 0, "done": 0, "dead": 0, "proposals": 0, "tokensToday": 0}
    first = store.claim_evaluations(clock(), clock.now + timedelta(minutes=10), 1)
    second = store.claim_evaluations(clock(), clock.now + timedelta(minutes=10), 5)
    assert [j.fragment_id for j in first] == [a] and [j.fragment_id for j in second] == [b]
    assert store.claim_evaluations(clock(), clock.now + timedelta(minutes=10), 5) == []  # both leased
    assert (first[0].status, first[0].attempts) == ("running", 1)
    clock.now += timedelta(minutes=11)  # a worker that died gives its jobs up when the lease ends
    again = store.claim_evaluations(clock(), clock.now + timedelta(minutes=10), 5)
    assert sorted(j.fragment_id for j in again) == sorted([a, b]) and {j.attempts for j in again} == {2}


def test_a_consolidation_run_queues_the_memories_never_evaluated(make_app: Callable[..., App]) -> None:
    app = make_app()
    app.service.remove_listener(evaluator(app).on_change)  # as if queueing had failed
    queue, app.service.queue_in_write = app.service.queue_in_write, None
    fid = remember(app, PORT_A)
    assert stats(app)["queued"] == 0
    app.service.add_listener(evaluator(app).on_change)
    app.service.queue_in_write = queue
    app.service.memory_consolidate(ConsolidateInput(), CallContext())
    assert [j.fragment_id for j in app.store.evaluation_jobs(AgentScope("alice"), "queued", 10)] == [fid]
    assert evaluator(app).drain().done == 1 and fragment(app, fid).verified_at is not None


def test_a_memory_and_its_evaluation_job_are_written_in_one_transaction(make_app: Callable[..., App]) -> None:
    app = make_app()
    app.service.remove_listener(evaluator(app).on_change)  # no queueing after the commit: the write's own
    fid = remember(app, PORT_A)
    assert [j.fragment_id for j in app.store.evaluation_jobs(AgentScope("alice"), "queued", 10)] == [fid]
    faces = [  # every face's new memory: 001 store_memory, 002 commit_memory, 003 memento_store
        app.service.entities.store_memory(StoreMemoryInput(content="Alice reviews the billing pull requests"), ALICE).memory.id,
        app.service.protocol.memories.store(ProtocolStoreInput(content="Rotate the signing keys every quarter"), ALICE).id,
    ]
    app.service.vault.commit(CommitMemoryInput(scope="vault", key="owner", content="Billing is owned by Alice"), ALICE)
    queued = {j.fragment_id for j in app.store.evaluation_jobs(AgentScope("alice"), "queued", 10)}
    assert len(queued) == 4 and {fid, *faces} <= queued

    def failing(agent_id: str, ids: Sequence[str]) -> int:
        raise RuntimeError("the queue refused")

    app.service.queue_in_write = failing
    with pytest.raises(RuntimeError):
        remember(app, DEPLOY)
    stored = [f.content for f in app.store.list_fragments(AgentScope("alice"), SearchFilter(), 10)]
    assert len(stored) == 4 and DEPLOY not in stored  # nothing half-written


def test_finishing_a_job_writes_utility_links_and_proposals_of_the_same_agent_only(make_app: Callable[..., App], clock: Clock) -> None:
    app = make_app()
    mine, other, foreign = remember(app, PORT_A), remember(app, DEPLOY), remember(app, PORT_B, BOB)
    (job,) = [j for j in app.store.claim_evaluations(clock(), clock.now + timedelta(minutes=5), 5) if j.fragment_id == mine]
    outcome = EvaluationOutcome(0.42, {"utility": 0.42}, contradicts=(other, foreign), merges=((other, 0.9, "r"), (foreign, 0.9, "r")))
    clock.now += timedelta(seconds=1)
    assert app.store.finish_evaluation(job, outcome, clock())
    memory = fragment(app, mine)
    assert (memory.judged_utility, memory.verified_at) == (0.42, clock.now)  # the judgement, kept apart
    last = memory.accessed_at or memory.created_at
    assert memory.utility_score == utility(memory.importance, memory.access_count, last, clock.now, 30.0, 0.42)  # blended in
    assert other in memory.linked_to and foreign not in memory.linked_to  # bob's memory is never linked
    assert [(p.from_id, p.to_id) for p in app.store.merge_proposals(AgentScope("alice"), "open", 10)] == [(mine, other)]
    assert app.store.merge_proposals(AgentScope("bob"), None, 10) == []  # alice's proposals are invisible to bob
    assert not app.store.finish_evaluation(job, outcome, clock())  # done already: nothing changes twice
    (done,) = app.store.evaluation_jobs(AgentScope("alice"), "done", 10)
    assert done.result == {"utility": 0.42} and app.store.evaluation_jobs(AgentScope("bob"), "done", 10) == []


def test_failed_jobs_retry_later_then_die_and_the_operator_requeues_them(make_app: Callable[..., App], clock: Clock) -> None:
    app = make_app()
    fid = remember(app, PORT_A)
    store, lease = app.store, timedelta(minutes=10)
    (job,) = store.claim_evaluations(clock(), clock.now + lease, 5)
    store.fail_evaluation(job.id, "HTTP 500", clock(), clock.now + timedelta(seconds=30))
    assert store.claim_evaluations(clock(), clock.now + lease, 5) == []  # not due yet
    clock.now += timedelta(seconds=30)
    (job,) = store.claim_evaluations(clock(), clock.now + lease, 5)
    store.fail_evaluation(job.id, "HTTP 500 again", clock(), None)
    (dead,) = store.evaluation_jobs(AgentScope("alice"), "dead", 10)
    assert (dead.fragment_id, dead.attempts, dead.last_error) == (fid, 2, "HTTP 500 again")
    assert store.requeue_evaluations(AgentScope("bob"), [dead.id], clock()) == 0  # not bob's
    assert store.requeue_evaluations(AgentScope("alice"), [dead.id], clock()) == 1
    (job,) = store.claim_evaluations(clock(), clock.now + lease, 5)
    assert job.attempts == 1
    store.defer_evaluation(job.id, clock.now + timedelta(hours=1))  # the budget: the attempt is not counted
    clock.now += timedelta(hours=1)
    (job,) = store.claim_evaluations(clock(), clock.now + lease, 5)
    assert job.attempts == 1


def test_token_tallies_count_per_agent_day_and_provider(make_app: Callable[..., App], clock: Clock) -> None:
    app = make_app()
    day = clock.now.date()
    app.store.add_evaluation_tokens("alice", day, "llm", 100)
    app.store.add_evaluation_tokens("alice", day, "gemini", 20)
    app.store.add_evaluation_tokens("bob", day, "llm", 7)
    app.store.add_evaluation_tokens("alice", day + timedelta(days=1), "llm", 1000)
    assert app.store.evaluation_tokens(day) == {"alice": 120, "bob": 7}
    assert stats(app)["tokensToday"] == 120 and stats(app, BOB)["tokensToday"] == 7
    claimed = app.store.claim_evaluations(clock(), clock.now, 5, exclude_agents=["alice"])
    assert claimed == []


# ---------------------------------------------------------------- the heuristic and the strict reading of a model


def test_the_heuristic_prefers_specific_actionable_text_and_finds_number_and_negation_conflicts(make_app: Callable[..., App]) -> None:
    app = make_app()
    vague, port, port_b = remember(app, "maybe something"), remember(app, PORT_A), remember(app, PORT_B)
    never = remember(app, "The staging database does not listen on port 5432 on host db-staging.internal.")
    judged = heuristic(fragment(app, port), [])
    assert judged.utility > heuristic(fragment(app, vague), []).utility
    near = [Neighbour(fragment(app, port_b), 0.9), Neighbour(fragment(app, never), 0.9), Neighbour(fragment(app, vague), 0.2)]
    assert heuristic(fragment(app, port), near).contradicts == (port_b, never)


# Lines of one template that name different things: close in meaning, other numbers, no contradiction.
TEMPLATE = [
    f"Build {n} finished: uploaded package {name} to the internal registry in {s} seconds."
    for n, name, s in ((101, "alpha", 42), (102, "beta", 57), (103, "gamma", 61), (104, "delta", 38), (105, "epsilon", 44))
]


def test_the_offline_judge_links_a_real_contradiction_not_lines_of_one_template(make_app: Callable[..., App]) -> None:
    app = make_app(MEMENTO_EVALUATOR_PROVIDER="heuristic")
    lines = [remember(app, text) for text in TEMPLATE]
    port_a, port_b = remember(app, PORT_A), remember(app, PORT_B)
    cache_on = remember(app, "The response cache is enabled for the search API in production.")
    cache_off = remember(app, "The response cache is disabled for the search API in production.")
    assert evaluator(app).drain().done == len(TEMPLATE) + 4
    near = [Neighbour(fragment(app, other), 0.9) for other in lines[1:]]
    assert heuristic(fragment(app, lines[0]), near).contradicts == ()  # close, other numbers, other names
    for line in lines:
        assert fragment(app, line).linked_to == []
    assert port_a in fragment(app, port_b).linked_to and cache_on in fragment(app, cache_off).linked_to
    done = {j.fragment_id: j.result or {} for j in app.store.evaluation_jobs(AgentScope("alice"), "done", 20)}
    assert all(done[line]["contradicts"] == [] for line in lines)
    assert done[port_b]["contradicts"] == [port_a]


def test_a_models_answer_is_read_strictly() -> None:
    assert parse_answer('{"informational": 1, "specificity": 0.5, "actionability": 0, "contradicts": ["x"]}', ["x"]) == (1, 0.5, 0, ("x",))
    assert parse_answer('```json\n{"informational": 1, "specificity": 1, "actionability": 1}\n```', [])[3] == ()
    for bad in ("useful", "[]", '{"informational": 2, "specificity": 1, "actionability": 1}', '{"informational": true}'):
        with pytest.raises(InvalidAnswer):
            parse_answer(bad, ["x"])
    with pytest.raises(InvalidAnswer, match="unknown"):
        parse_answer('{"informational": 1, "specificity": 1, "actionability": 1, "contradicts": ["bob-memory"]}', ["x"])


# ---------------------------------------------------------------- through a real HTTP model server


@pytest.mark.parametrize("kind", ["llm", "gemini"])
def test_a_model_server_scores_links_contradictions_proposes_merges_and_counts_tokens(
    make_app: Callable[..., App], provider: Provider, kind: str
) -> None:
    env = (
        {"MEMENTO_LLM_URL": f"{provider.url}/v1"}
        if kind == "llm"
        else {"GEMINI_API_KEY": "k", "MEMENTO_GEMINI_URL": f"{provider.url}/v1beta"}
    )
    app = make_app(MEMENTO_EVALUATOR_PROVIDER=kind, **env)
    port_a, deploy = remember(app, PORT_A), remember(app, DEPLOY, type_="procedure")
    port_b, deploy_again = remember(app, PORT_B), remember(app, DEPLOY_AGAIN, type_="procedure")
    assert evaluator(app).drain().done == 4
    assert provider.state()["calls"] == 4
    assert fragment(app, port_a).judged_utility == pytest.approx(0.805, abs=1e-3)  # 0.35·0.9 + 0.35·0.8 + 0.3·0.7
    assert port_a in fragment(app, port_b).linked_to  # the model said they contradict: a link, nothing deleted
    assert [(p.from_id, p.to_id) for p in app.store.merge_proposals(AgentScope("alice"), "open", 10)] == [(deploy_again, deploy)]
    assert fragment(app, deploy_again).judged_utility < fragment(app, deploy).judged_utility  # it repeats an older one
    counts = stats(app)
    assert (counts["done"], counts["proposals"]) == (4, 1) and counts["tokensToday"] > 0
    (job,) = [j for j in app.store.evaluation_jobs(AgentScope("alice"), "done", 10) if j.fragment_id == port_b]
    assert job.result is not None and (job.result["provider"], job.result["contradicts"]) == (kind, [port_a])


@pytest.mark.parametrize("provider", ["500", "garbage"], indirect=True)
def test_a_failing_server_is_retried_with_back_off_then_dead_lettered(
    make_app: Callable[..., App], provider: Provider, clock: Clock
) -> None:
    app = make_app(MEMENTO_LLM_URL=f"{provider.url}/v1", MEMENTO_EVALUATOR_MAX_ATTEMPTS="3", MEMENTO_EVALUATOR_BACKOFF_S="10")
    fid = remember(app, PORT_A)
    waits = []
    for _ in range(3):
        assert evaluator(app).drain().handled == 1
        assert evaluator(app).drain().handled == 0  # the retry waits for its back-off
        jobs = app.store.evaluation_jobs(AgentScope("alice"), None, 10)
        waits.append(jobs[0].next_attempt_at - clock.now)
        clock.now = jobs[0].next_attempt_at
    (dead,) = app.store.evaluation_jobs(AgentScope("alice"), "dead", 10)
    assert waits[:2] == [timedelta(seconds=10), timedelta(seconds=20)]  # doubled
    assert dead.attempts == 3 and ("HTTP 500" in str(dead.last_error) or "not JSON" in str(dead.last_error))
    assert provider.state()["calls"] == 3 and fragment(app, fid).utility_score == 1.0  # left as it was
    assert stats(app)["dead"] == 1
    assert app.store.requeue_evaluations(AgentScope("alice"), [], clock()) == 1
    assert stats(app)["queued"] == 1


@pytest.mark.parametrize("provider", ["invalid"], indirect=True)
def test_an_invalid_answer_is_asked_again_then_the_heuristic_decides(make_app: Callable[..., App], provider: Provider) -> None:
    app = make_app(MEMENTO_LLM_URL=f"{provider.url}/v1")
    fid = remember(app, PORT_A)
    assert evaluator(app).drain().done == 1
    assert provider.state()["calls"] == 2
    (job,) = app.store.evaluation_jobs(AgentScope("alice"), "done", 10)
    assert job.result is not None and job.result["provider"] == "heuristic" and "not JSON" in job.result["fallback"]
    assert fragment(app, fid).judged_utility == heuristic(fragment(app, fid), []).utility


def test_an_agent_over_its_daily_budget_waits_for_the_next_day_while_others_proceed(
    make_app: Callable[..., App], provider: Provider, clock: Clock
) -> None:
    app = make_app(MEMENTO_LLM_URL=f"{provider.url}/v1", MEMENTO_EVALUATOR_DAILY_TOKENS="50")
    app.store.add_evaluation_tokens("alice", clock.now.date(), "llm", 50)
    mine, theirs = remember(app, PORT_A), remember(app, DEPLOY, BOB)
    assert evaluator(app).drain().done == 1
    assert fragment(app, theirs, "bob").verified_at == clock.now and stats(app, BOB)["done"] == 1
    assert stats(app)["queued"] == 1 and fragment(app, mine).utility_score == 1.0
    clock.now = next_day(clock.now)
    assert evaluator(app).drain().done == 1 and stats(app)["done"] == 1


def test_a_job_never_reads_links_or_proposes_another_agents_memories(make_app: Callable[..., App], provider: Provider) -> None:
    app = make_app(MEMENTO_LLM_URL=f"{provider.url}/v1")
    remember(app, "Bob's secret: " + PORT_B, BOB)
    remember(app, DEPLOY_AGAIN, BOB, type_="procedure")
    mine, deploy = remember(app, PORT_A), remember(app, DEPLOY, type_="procedure")
    assert evaluator(app).drain().done == 4
    alices = [p for p in provider.state()["prompts"] if PORT_A in p or DEPLOY in p]
    assert len(alices) == 2 and not any("Bob's secret" in p or DEPLOY_AGAIN in p for p in alices)
    assert fragment(app, mine).linked_to == [] and fragment(app, deploy).linked_to == []
    assert app.store.merge_proposals(AgentScope("alice"), None, 10) == []
    assert app.store.merge_proposals(AgentScope("bob"), None, 10) == []


@pytest.mark.parametrize("provider", ["hang"], indirect=True)
def test_a_hanging_provider_never_delays_a_write(make_app: Callable[..., App], provider: Provider) -> None:
    app = make_app(MEMENTO_LLM_URL=f"{provider.url}/v1", MEMENTO_LLM_TIMEOUT_S="600", MEMENTO_EVALUATOR_POLL_MS="10")
    remember(app, PORT_A)
    evaluator(app).start()
    with anyio.from_thread.start_blocking_portal() as portal:  # wait for the provider to hold the request, without sleeping blind
        portal.call(_until, lambda: provider.state()["holding"] == 1)
    written = remember(app, DEPLOY)  # the worker is stuck in the model call: the write is not
    assert fragment(app, written).content == DEPLOY and stats(app)["queued"] == 1 and stats(app)["running"] == 1
    assert provider.state()["holding"] == 1


async def _until(check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    with anyio.fail_after(timeout_s):
        while not await anyio.to_thread.run_sync(check):
            await anyio.sleep(0.02)


# ---------------------------------------------------------------- MCP sampling with the official client


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


JUDGED = json.dumps({"informational": 0.6, "specificity": 0.6, "actionability": 0.6, "contradicts": []})


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_clients_own_model_evaluates_a_remembered_memory_over_stdio(tmp_path: Path, store_env: StoreEnv) -> None:
    store = store_env(tmp_path)
    env = {
        **server_env(store),
        "MEMENTO_EVALUATOR_ENABLED": "true",
        "MEMENTO_EVALUATOR_PROVIDER": "sampling",
        "MEMENTO_EVALUATOR_POLL_MS": "20",
        "MEMENTO_STDIO_AGENT": "agent-s",
    }
    asked: list[CreateMessageRequestParams] = []

    async def sampler(context: ClientRequestContext, params: CreateMessageRequestParams) -> CreateMessageResult:
        asked.append(params)
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text=JUDGED), model="client-model")

    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--transport", "stdio"], env=env)
    # The evaluator samples through a classic session's channel (a 2026 server sends no requests).
    async with Client(params, read_timeout_seconds=TIMEOUT_S, sampling_callback=sampler, mode="legacy") as client:
        stored = data(await client.call_tool("remember", {"content": PORT_A, "topic": "db", "type": "fact"}))
        with anyio.fail_after(TIMEOUT_S):
            while (evaluated := data(await client.call_tool("memory_stats", {}))["evaluator"])["done"] < 1:
                await anyio.sleep(0.05)
        assert evaluated == {"queued": 0, "running": 0, "done": 1, "dead": 0, "proposals": 0, "tokensToday": evaluated["tokensToday"]}
        assert evaluated["tokensToday"] > 0 and len(asked) == 1 and PORT_A in str(asked[0].messages[0].content)
    app = build_app(Settings(**store, EMBEDDING_PROVIDER="hash"), embedder=HashEmbedder(256))  # type: ignore[arg-type]
    try:
        memory = fragment(app, stored["id"], "agent-s")
        assert memory.judged_utility == pytest.approx(0.6) and memory.verified_at is not None
    finally:
        app.close()


# ---------------------------------------------------------------- the operator's command


def test_the_operator_runs_the_queue_applies_a_merge_proposal_and_requeues_dead_jobs(
    tmp_path: Path, store_env: StoreEnv, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from memento.cli import main

    for key, value in {**store_env(tmp_path), "EMBEDDING_PROVIDER": "hash"}.items():
        monkeypatch.setenv(key, value)
    app = build_app(Settings(), embedder=HashEmbedder(256))  # the hash embedder, as the command's own app
    try:
        original, repeat = remember(app, DEPLOY, type_="procedure"), remember(app, DEPLOY_AGAIN, type_="procedure")
        bobs = remember(app, PORT_A, BOB)

        def run(*argv: str) -> Any:
            capsys.readouterr()
            assert main(["evaluator", *argv, "--json"]) == 0
            return json.loads(capsys.readouterr().out)

        assert run("--run")["done"] == 3
        (proposal,) = run("--proposals", "--agent", "alice")
        assert (proposal["from_id"], proposal["to_id"]) == (repeat, original)
        assert run("--proposals", "--agent", "bob") == []
        assert main(["evaluator", "--apply", str(proposal["id"]), "--agent", "bob"]) == 1  # not bob's to apply
        assert run("--apply", str(proposal["id"])) == {"applied": proposal["id"], "absorbed": repeat, "into": original}
        assert app.store.get_many(AgentScope("alice"), [repeat]) == []  # absorbed; its text kept in the version trail
        assert any(v["content"] == DEPLOY_AGAIN for v in app.store.versions(AgentScope("alice"), original))
        assert run("--proposals") == []  # the proposal went with the absorbed memory
        assert app.store.claim_evaluations(app.service.clock(), app.service.clock(), 1) == []  # nothing left to do
        app.store.enqueue_evaluations(AgentScope("bob"), [bobs], app.service.clock())  # done already: a new job
        (job,) = app.store.claim_evaluations(app.service.clock(), app.service.clock() + timedelta(minutes=1), 1)
        app.store.fail_evaluation(job.id, "boom", app.service.clock(), None)
        assert [d["id"] for d in run("--dead", "--agent", "bob")] == [job.id] and run("--dead", "--agent", "alice") == []
        assert run("--requeue") == {"requeued": 1} and run()["queued"] == 1
    finally:
        app.close()
