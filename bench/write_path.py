"""`remember` latency now that embedding is off the write path (issue 13, defect 5).

Three runs of the same workload (N remembers of distinct sentences on a fresh SQLite store):

- `local`: the default local model (embedded by the outbox worker in the background);
- `local, inline`: the same model called on the calling thread before each write, which is what
  `remember` used to do (the figure the outbox removes from the write path);
- `hanging`: an OpenAI-compatible provider that holds every request (a local HTTP server that
  never answers within the client's timeout): writes go on, their rows wait in the outbox.

For each: remember p50/p95/max in ms, and how long the worker then took to embed the backlog
(`settle`). Run: `PYTHONPATH=src python bench/write_path.py [--n 200]`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from memento.app import App, build_app
from memento.embeddings.openai import OpenAICompatibleEmbedder
from memento.embeddings.protocol import Embedder
from memento.models import CallContext, RememberInput
from memento.settings import Settings

SUBJECTS = ("the billing service", "the deploy script", "the staging database", "Alice's laptop", "the nightly backup", "the VPN")
FACTS = (
    "needs a restart after upgrades",
    "runs on port {n}",
    "was moved to rack {n}",
    "fails when the disk is full",
    "is owned by team {n}",
)


def sentences(n: int) -> list[str]:
    return [f"{SUBJECTS[i % len(SUBJECTS)]} {FACTS[(i // len(SUBJECTS)) % len(FACTS)].format(n=i)} (note {i})" for i in range(n)]


class HangingProvider:
    """A /v1/embeddings server that holds every request until closed."""

    def __init__(self) -> None:
        self.release = threading.Event()
        release = self.release

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                release.wait(120)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def run(label: str, embedder: Embedder | str | None, texts: list[str], *, inline: bool = False, settle: bool = True) -> None:
    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(database_url=f"sqlite:///{Path(folder) / 'bench.db'}")
        app: App = build_app(settings, embedder=embedder)  # type: ignore[arg-type]
        try:
            service, ctx = app.service, CallContext()
            if app.embedder is not None and label.startswith("local"):
                app.embedder.embed_passages(["warm up the model"])  # the first load is not a write's cost
            times = []
            for text in texts:
                started = time.perf_counter()
                if inline and app.embedder is not None:
                    app.embedder.embed_passages([text])  # what the write path used to wait for
                service.remember(RememberInput.model_validate({"content": text, "topic": "bench", "type": "fact"}), ctx)
                times.append((time.perf_counter() - started) * 1000)
            backlog = ""
            if settle:
                started = time.perf_counter()
                done = service.settle(120)
                backlog = f"; backlog embedded in {time.perf_counter() - started:.2f} s" + ("" if done else " (not all)")
            times.sort()
            p95 = times[int(0.95 * (len(times) - 1))]
            print(f"{label:<16} remember p50 {statistics.median(times):6.2f} ms  p95 {p95:6.2f} ms  max {times[-1]:7.2f} ms{backlog}")
        finally:
            app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=200, help="remember calls per run")
    args = parser.parse_args()
    texts = sentences(args.n)
    print(f"{args.n} remembers per run, SQLite, Python {sys.version.split()[0]}")
    run("local", "auto", texts)
    run("local, inline", "auto", texts, inline=True)
    provider = HangingProvider()
    try:
        hanging = OpenAICompatibleEmbedder("", base_url=provider.url, model="hanging", dimensions=384, timeout_s=5.0)
        run("hanging", hanging, texts, settle=False)
    finally:
        provider.close()


if __name__ == "__main__":
    main()
