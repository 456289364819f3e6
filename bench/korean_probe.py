"""Korean/English parity probe: the same memories and questions in both languages, through
Memento's real write and recall path.

Data: bench/data/korean_probe.json (written for this repository; its `about` field describes it).
For each run a fresh SQLite store holds every memory of one language (one agent, remembered as
facts); settle() waits until every memory is embedded; then each question is asked with
recall(text=question, limit=10). A question scores by where its gold memories land in the ten
results: R@k (share of gold memories in the top k), MRR (first gold hit).

Runs: English and Korean with the cascade (the default recall) and keyword-only (no embedder:
the full-text tier alone), plus, for information, the cross-lingual pairs (Korean questions over
English memories and English questions over Korean memories). The parity figure is the Korean
R@5 over the English R@5 (issue 14 asks for >= 0.95 with the cascade).

    python bench/korean_probe.py [--embedder local|hash] [--by-kind] [--json FILE]
                                 [--embed-cache DIR | --no-embed-cache]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from embed_cache import DEFAULT_DIR, CachedEmbedder

from memento.app import build_app
from memento.embeddings.factory import build_embedder
from memento.embeddings.protocol import Embedder
from memento.models import CallContext, FragmentType, RecallInput, RememberInput
from memento.settings import Settings

DEFAULT_DATA = Path(__file__).resolve().parent / "data" / "korean_probe.json"
NOW = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
LIMIT = 10
KS = (1, 5, 10)


@dataclass(frozen=True)
class Run:
    """One row of the table: which language is stored, which is asked, with or without vectors."""

    memories: str  # "en" or "ko"
    questions: str
    mode: str  # "cascade" or "keyword-only"

    @property
    def label(self) -> str:
        return f"{self.questions} q / {self.memories} mem, {self.mode}"


RUNS = (
    Run("en", "en", "cascade"),
    Run("ko", "ko", "cascade"),
    Run("en", "en", "keyword-only"),
    Run("ko", "ko", "keyword-only"),
    Run("en", "ko", "cascade"),
    Run("ko", "en", "cascade"),
    Run("en", "ko", "keyword-only"),
    Run("ko", "en", "keyword-only"),
)


def ask_all(data: dict, run: Run, embedder: Embedder | None, workdir: Path) -> list[dict]:
    """Store the memories of `run.memories` in a fresh store and ask every question in `run.questions`."""
    db = workdir / f"{run.memories}-{run.questions}-{run.mode}.db"
    settings = Settings(MEMENTO_SQLITE_SYNCHRONOUS="NORMAL", database_url=f"sqlite:///{db}")
    app = build_app(settings, embedder=embedder if run.mode == "cascade" else None, clock=lambda: NOW)
    ctx = CallContext()
    to_probe: dict[str, str] = {}
    try:
        for memory in data["memories"]:
            stored = app.service.remember(RememberInput(content=memory[run.memories], topic="notes", type=FragmentType.FACT), ctx)
            to_probe[stored.id] = memory["id"]
        app.service.settle(600)  # every memory embedded before the first question
        rows = []
        for q in data["questions"]:
            found = app.service.recall(RecallInput(text=q[run.questions], limit=LIMIT, tokenBudget=100_000, includeLinks=False), ctx)
            ranked = [to_probe[f.id] for f in found.fragments if f.id in to_probe]
            rows.append({"id": q["id"], "kind": q["kind"], "gold": q["gold"], "ranked": ranked})
        return rows
    finally:
        app.close()


def metrics(rows: list[dict]) -> dict[str, float]:
    """R@1/5/10 and MRR (x100) over `rows`."""
    out: dict[str, float] = {"n": len(rows)}
    if not rows:
        return out
    for k in KS:
        out[f"R@{k}"] = 100 * sum(len(set(r["gold"]) & set(r["ranked"][:k])) / len(r["gold"]) for r in rows) / len(rows)
    out["MRR"] = 100 * sum(next((1 / (i + 1) for i, m in enumerate(r["ranked"]) if m in r["gold"]), 0.0) for r in rows) / len(rows)
    return out


def print_table(results: dict[str, dict[str, float]]) -> None:
    header = ["run", "n", *[f"R@{k}" for k in KS], "MRR"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for label, m in results.items():
        print("| " + " | ".join([label, str(int(m["n"]))] + [f"{m.get(h, 0):.1f}" for h in header[2:]]) + " |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--embedder", choices=["local", "hash"], default="local", help="the cascade's embedder")
    parser.add_argument("--by-kind", action="store_true", help="also break each run down by question kind")
    parser.add_argument("--show-misses", choices=["en", "ko"], help="list the questions missed at 5 in this monolingual run")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--embed-cache", type=Path, default=DEFAULT_DIR, help="keep the model's vectors here between runs")
    parser.add_argument("--no-embed-cache", action="store_true", help="embed everything afresh")
    args = parser.parse_args()
    raw = args.data.read_bytes()
    data = json.loads(raw)
    embedder = build_embedder(Settings(embedding_provider=args.embedder))
    if embedder is not None and not args.no_embed_cache:
        embedder = CachedEmbedder(embedder, args.embed_cache)
    results: dict[str, dict[str, float]] = {}
    per_run: dict[Run, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for run in RUNS:
            rows = ask_all(data, run, embedder, Path(tmp))
            per_run[run] = rows
            results[run.label] = metrics(rows)
            if args.by_kind:
                for kind in sorted({r["kind"] for r in rows}):
                    results[f"{run.label} [{kind}]"] = metrics([r for r in rows if r["kind"] == kind])
    print(
        f"data {args.data.name} sha256 {hashlib.sha256(raw).hexdigest()}: {len(data['memories'])} memories, {len(data['questions'])} questions"
    )
    print(f"settings: cascade embedder={embedder.name if embedder else 'none'}; keyword-only: no embedder; recall(limit={LIMIT})")
    print_table(results)
    parity = {}
    for mode in ("cascade", "keyword-only"):
        en, ko = results[Run("en", "en", mode).label], results[Run("ko", "ko", mode).label]
        parity[mode] = ko["R@5"] / en["R@5"] if en["R@5"] else 0.0
        print(f"parity ko/en R@5, {mode}: {parity[mode]:.3f}")
    if args.show_misses:
        questions = {q["id"]: q for q in data["questions"]}
        texts = {m["id"]: m[args.show_misses] for m in data["memories"]}
        for mode in ("cascade", "keyword-only"):
            print(f"\nmissed at 5 ({args.show_misses}, {mode}):")
            for r in per_run[Run(args.show_misses, args.show_misses, mode)]:
                if not set(r["gold"]) & set(r["ranked"][:5]):
                    top = r["ranked"][0] if r["ranked"] else None
                    print(f"  {r['id']} {questions[r['id']][args.show_misses]!r} gold={r['gold']} top={top}: {texts.get(top or '', '')!r}")
    if args.json:
        args.json.write_text(json.dumps({"runs": results, "parity_r5": parity}, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
