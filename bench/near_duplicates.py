"""How many distinct memories would near-duplicate merging swallow? (001 §6.1, the entity face.)

    python bench/near_duplicates.py [--limit-conversations N]

Every turn of the LoCoMo dev conversations is a distinct statement (exact repeats, which the hash
dedupe handles, are left out). For each threshold, the share of turns whose raw cosine to an
earlier turn of the same conversation is above it — the turns `store_memory` would merge into
another memory instead of storing — with and without the numbers guard (two texts with different
numbers are never merged). A near-duplicate threshold is harmless when that share is ~0: merging
distinct facts is the failure to avoid. The figures are in docs/search.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from locomo import DEFAULT_DATA, sessions, turn_text

from memento.embeddings.factory import build_embedder
from memento.entity_service import _numbers
from memento.settings import Settings

THRESHOLDS = (0.90, 0.93, 0.95, 0.96, 0.97, 0.98)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--limit-conversations", type=int, default=None)
    args = parser.parse_args()
    embedder = build_embedder(Settings())
    assert embedder is not None, "needs the local embedding model"
    merged = dict.fromkeys(THRESHOLDS, 0)
    guarded = dict.fromkeys(THRESHOLDS, 0)
    total = 0
    for sample in json.loads(args.data.read_bytes())[: args.limit_conversations]:
        texts = list(dict.fromkeys(turn_text(turn) for _, turns in sessions(sample["conversation"]) for turn in turns))
        vectors = embedder.embed_passages(texts)
        numbers = [_numbers(t) for t in texts]
        sims = vectors @ vectors.T
        for i in range(1, len(texts)):
            earlier = sims[i, :i]
            same_numbers = np.array([numbers[j] == numbers[i] for j in range(i)])
            for t in THRESHOLDS:
                merged[t] += bool((earlier > t).any())
                guarded[t] += bool(((earlier > t) & same_numbers).any())
        total += len(texts)
        print(f"{sample['sample_id']}: {len(texts)} distinct turns", file=sys.stderr)
    print(f"embedding model: {embedder.name}; {total} distinct turns")
    print("| raw cosine above | turns merged | with the numbers guard |")
    print("|---|---|---|")
    for t in THRESHOLDS:
        print(f"| {t:.2f} | {100 * merged[t] / total:.2f}% ({merged[t]}) | {100 * guarded[t] / total:.2f}% ({guarded[t]}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
