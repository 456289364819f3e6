"""Where LoCoMo's evidence sits in each recall tier, with and without distractor memories.

For each question: the full-text tier's and the vector tier's own candidate lists (pool 150,
the store's `text_search` and `vector_search`, as recall calls them), their recall of the
evidence in the pool and in the top 10 and how many distractors they hold; then `recall` itself
(R@5, R@50, distractors in its top 5 and 50). Same stores as `bench/locomo.py --distractors N`.

    python bench/locomo_tiers.py [--distractors N] [--limit-conversations K] [--data FILE] [--embed-cache DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np
from embed_cache import DEFAULT_DIR
from locomo import (
    DEFAULT_DATA,
    DISTRACTOR_SOURCE,
    _embedder,
    copy_store,
    distractor_memories,
    distractor_store,
    normalise_ids,
    sessions,
    turn_text,
)

from memento.analysis import query_terms
from memento.app import build_app
from memento.models import DEFAULT_AGENT, AgentScope, CallContext, FragmentType, RecallInput, RememberInput
from memento.settings import Settings
from memento.storage.protocol import SearchFilter

POOL = 150


def main() -> int:
    import json

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--distractors", type=int, default=0)
    parser.add_argument("--embed-cache", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args()
    data = json.loads(args.data.read_bytes())[: args.limit_conversations]
    settings = Settings(MEMENTO_SQLITE_SYNCHRONOUS="NORMAL")
    rows = distractor_memories(args.distractors, DISTRACTOR_SOURCE, 0, "local", settings, args.embed_cache)
    stats: dict[str, list[float]] = defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        template = None
        if rows:
            first = min(sessions(sample["conversation"])[0][0] for sample in data)
            template = distractor_store(rows, Path(tmp), settings, "local", args.embed_cache, first)[0]
        for sample in data:
            sess = sessions(sample["conversation"])
            now = sess[-1][0]
            path = Path(tmp) / (sample["sample_id"] + ".db")
            if template is not None:
                copy_store(template, path)
            conv = settings.model_copy(update={"database_url": f"sqlite:///{path}"})
            embedder = _embedder("local", conv, args.embed_cache)
            assert embedder is not None
            app = build_app(conv, embedder=embedder, clock=lambda now=now: now)
            ctx = CallContext()
            dia: dict[str, list[str]] = defaultdict(list)
            for date, turns in sess:
                for turn in turns:
                    made = app.service.remember(
                        RememberInput(content=turn_text(turn), topic="conversation", type=FragmentType.FACT, createdAt=date), ctx
                    )
                    dia[made.id].append(turn["dia_id"])
            app.service.settle(600)
            scope = AgentScope(DEFAULT_AGENT)
            for qa in sample["qa"]:
                gold = set(normalise_ids(qa.get("evidence") or []))
                if not gold:
                    continue
                question = qa["question"]
                tiers = {
                    "full-text": app.store.text_search(scope, query_terms(question), SearchFilter(), POOL),
                    "vector": app.store.vector_search(scope, embedder.embed_query(question), SearchFilter(), POOL),
                }
                for name, hits in tiers.items():
                    stats[f"{name}: evidence recall in its pool"].append(
                        len(gold & {d for h in hits for d in dia.get(h.id, [])}) / len(gold)
                    )
                    stats[f"{name}: evidence recall in its top 10"].append(
                        len(gold & {d for h in hits[:10] for d in dia.get(h.id, [])}) / len(gold)
                    )
                    stats[f"{name}: distractors in its top 10"].append(sum(h.id not in dia for h in hits[:10]))
                    stats[f"{name}: distractors in its pool"].append(sum(h.id not in dia for h in hits))
                found = app.service.recall(RecallInput(text=question, limit=50, tokenBudget=100_000, includeLinks=False), ctx)
                ranked: list[str] = []
                for f in found.fragments:
                    ranked += [d for d in dia.get(f.id, []) if d not in ranked]
                stats["recall: distractors in the top 5"].append(sum(f.id not in dia for f in found.fragments[:5]))
                stats["recall: distractors in the top 50"].append(sum(f.id not in dia for f in found.fragments[:50]))
                stats["recall: R@5"].append(100 * len(gold & set(ranked[:5])) / len(gold))
                stats["recall: R@50"].append(100 * len(gold & set(ranked[:50])) / len(gold))
            app.close()
    print(f"{args.distractors} distractors, {len(data)} conversations, pool {POOL} per tier")
    for name, values in stats.items():
        print(f"| {name} | {np.mean(values):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
