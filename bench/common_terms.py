"""Names that are common in the store but discriminate in the question (issue 14, known loss c).

Above 2,000 memories the full-text tier treats a term found in more than 2% of the scope as
common. Dropped (`MEMENTO_TEXT_COMMON_TERMS=drop`, the rule before this bench), "Alice" goes from
"What did Alice say about her mother?" when the store holds hundreds of Alice's turns; scored over
the candidates the rarer terms find (`score`, the default) it still decides between memories that
say the same thing in different mouths.

The store: LoCoMo dev turns (`../shared/bench/data/locomo-dev.json`), each said by several
speakers drawn from a pool of synthetic names, until `--size` memories (each name ends up in
about size/names memories: common). The questions: a sampled memory's speaker and a few of its
content words ("What did Mira say about hiking, trail?"); the target is that memory. Full text
only (no embedder), through `service.recall`, and the tier alone (`store.text_search`).

    python bench/common_terms.py [--size 10000] [--questions 300] [--names 20] [--rule score|drop|both]

Prints the target-hit rate at 1, 5 and 10 and recall's and the tier's p50/p95 latency per rule.
To measure the code before this change, run it against that checkout with `--rule default`.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from locomo_data import locomo_dev

from memento.analysis import ENGLISH_STOPWORDS, query_terms
from memento.app import build_app
from memento.models import AgentScope, CallContext, FragmentType, RecallInput
from memento.settings import Settings
from memento.storage.protocol import NewFragment, SearchFilter

DATA = locomo_dev()
NAMES = (
    "Mira Tomas Ines Kofi Lena Ravi Sofia Jonas Amara Felix Noor Hugo Yara Elias Maya Omar Clara Theo Zane Priya "
    "Luca Hana Ivan Nadia Otto Rosa Sami Vera Wren Aiko"
).split()
AGENT = "bench-agent"


def turns(path: Path) -> list[str]:
    """The dev split's turn texts (speaker removed: the bench assigns its own)."""
    data = json.loads(path.read_text())
    return [
        t["text"] for s in data for k, v in s["conversation"].items() if re.fullmatch(r"session_\d+", k) and isinstance(v, list) for t in v
    ]


def fill(app, texts: list[str], size: int, names: list[str], rng: random.Random) -> list[tuple[str, str, str]]:
    """`size` memories "{name}: {text}", each text said by several names; returns (id, name, text)."""
    scope, factory = AgentScope(AGENT), app.service.factory
    base = datetime(2025, 1, 1, tzinfo=UTC)
    out: list[tuple[str, str, str]] = []
    order = list(range(len(texts)))
    i = 0
    while len(out) < size:
        rng.shuffle(order)
        for k in order:
            if len(out) >= size:
                break
            name = rng.choice(names)
            draft = factory.draft(
                content=f"{name}: {texts[k]}", topic="conversation", type_=FragmentType.FACT, created_at=base + timedelta(minutes=i)
            )
            fragment, created = app.store.insert(scope, NewFragment(draft, AGENT, None, None))
            i += 1
            if created:
                out.append((fragment.id, name, texts[k]))
    return out


def question(name: str, text: str, rng: random.Random) -> str | None:
    """ "What did {name} say about {two or three of the text's content words}?" """
    words = [w for w in dict.fromkeys(re.findall(r"[a-z]{4,}", text.lower())) if w not in ENGLISH_STOPWORDS]
    if len(words) < 3:
        return None
    return f"What did {name} say about {', '.join(rng.sample(words, rng.choice((2, 3))))}?"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run(rule: str, args: argparse.Namespace, texts: list[str]) -> dict[str, float]:
    rng = random.Random(args.seed)
    names = NAMES[: args.names]
    env = {} if rule == "default" else {"MEMENTO_TEXT_COMMON_TERMS": rule}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(MEMENTO_SQLITE_SYNCHRONOUS="NORMAL", **env)  # type: ignore[arg-type]
        settings = settings.model_copy(update={"database_url": f"sqlite:///{Path(tmp) / 'bench.db'}"})
        app = build_app(settings, embedder=None)
        t0 = time.perf_counter()
        stored = fill(app, texts, args.size, names, rng)
        fill_s = time.perf_counter() - t0
        scope, ctx = AgentScope(AGENT), CallContext(agent_id=AGENT)
        asked: list[tuple[str, str]] = []
        for fid, name, text in rng.sample(stored, len(stored)):
            q = question(name, text, rng)
            if q:
                asked.append((fid, q))
            if len(asked) == args.questions:
                break
        hits = {1: 0, 5: 0, 10: 0}
        recall_ms: list[float] = []
        tier_ms: list[float] = []
        for fid, q in asked:
            t1 = time.perf_counter()
            found = app.service.recall(RecallInput(text=q, limit=10, includeLinks=False), ctx)
            recall_ms.append((time.perf_counter() - t1) * 1000)
            ids = [f.id for f in found.fragments]
            for k in hits:
                hits[k] += fid in ids[:k]
            t2 = time.perf_counter()
            app.store.text_search(scope, query_terms(q), SearchFilter(), 40)
            tier_ms.append((time.perf_counter() - t2) * 1000)
        app.close()
    n = len(asked)
    return {
        "memories": len(stored),
        "questions": n,
        "fill_s": fill_s,
        **{f"hit@{k}": 100 * v / n for k, v in hits.items()},
        "recall_p50": statistics.median(recall_ms),
        "recall_p95": pct(recall_ms, 0.95),
        "tier_p50": statistics.median(tier_ms),
        "tier_p95": pct(tier_ms, 0.95),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--names", type=int, default=20, help="speakers in the pool (at most 30)")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--rule", choices=["score", "drop", "both", "default"], default="both")
    args = parser.parse_args()
    texts = turns(args.data)
    rules = ["drop", "score"] if args.rule == "both" else [args.rule]
    print(f"{args.size} memories ({len(texts)} LoCoMo turns x {args.names} speakers), {args.questions} questions, seed {args.seed}")
    print("| rule | hit@1 | hit@5 | hit@10 | recall p50 ms | recall p95 ms | tier p50 ms | tier p95 ms |")
    print("|---|---|---|---|---|---|---|---|")
    for rule in rules:
        m = run(rule, args, texts)
        print(
            f"| {rule} | {m['hit@1']:.1f} | {m['hit@5']:.1f} | {m['hit@10']:.1f} | {m['recall_p50']:.2f} | {m['recall_p95']:.2f}"
            f" | {m['tier_p50']:.2f} | {m['tier_p95']:.2f} |",
            flush=True,
        )
        print(f"  ({m['memories']} memories filled in {m['fill_s']:.1f}s, {m['questions']} questions)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
