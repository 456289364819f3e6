"""A corpus of real, diverse text unrelated to any benchmark: distractor memories for scale runs.

The default source is the package list this workplace keeps at
/work/.library/env/packages/pypi.tsv (one PyPI project a line, tab-separated; the 5th column is
the project's one-line summary). Its non-empty summaries, deduplicated, are shuffled once with a
fixed seed, so `distractor_texts(n)` is the same n texts on every run and every machine that has
the same file, and the first 10,000 of a seed are the first 10,000 of its 100,000. Nothing of it
is committed as data. Elsewhere, pass `--distractor-source FILE` (any text file, one text a line;
a .tsv takes its 5th column): for an equivalent of the default, write the `summary` of PyPI
projects one a line (e.g. from the public PyPI BigQuery dataset or the JSON API of each project
of a package list), or use any other large, varied set of short texts.

    python bench/distractors.py --count 100000 [--distractor-source FILE] [--seed 0]
                                [--embed] [--embed-cache DIR] [--batch 512]

Without --embed it prints how many texts the source holds and a sample; with it, it embeds the
first --count texts with the local model into the benchmark cache (bench/embed_cache.py) in
batches, printing progress, so later runs (bench/hnsw_recall.py, bench/locomo.py --distractors)
read them from disk.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path

import numpy as np

from memento.embeddings.protocol import Embedder
from memento.factory import FragmentFactory
from memento.models import FragmentType
from memento.storage.protocol import AppStore, NewFragment, new_record

DEFAULT_SOURCE = Path("/work/.library/env/packages/pypi.tsv")
SUMMARY_COLUMN = 4  # 0-based: name, version, month, rank, summary


def read_source(path: Path) -> list[str]:
    """The source's texts, stripped, empty ones dropped, duplicates (case-sensitive) dropped, in file order.
    A .tsv file gives its 5th column (skipping a header row whose 5th column is `summary`)."""
    if not path.is_file():
        raise FileNotFoundError(f"distractor source {path} not found; pass --distractor-source FILE (one text a line)")
    tsv = path.suffix.lower() == ".tsv"
    seen: dict[str, None] = {}
    with path.open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle):
            if tsv:
                fields = line.rstrip("\n").split("\t")
                if len(fields) <= SUMMARY_COLUMN or (number == 0 and fields[SUMMARY_COLUMN].strip().lower() == "summary"):
                    continue
                text = fields[SUMMARY_COLUMN]
            else:
                text = line
            text = " ".join(text.split())
            if text:
                seen.setdefault(text, None)
    return list(seen)


@cache
def _shuffled(path: Path, seed: int) -> tuple[str, ...]:
    texts = read_source(path)
    random.Random(seed).shuffle(texts)
    return tuple(texts)


def distractor_texts(count: int, source: Path | None = None, seed: int = 0, offset: int = 0) -> list[str]:
    """`count` texts of the source's seeded shuffle, starting at `offset` (so a disjoint set of
    query texts is `distractor_texts(q, offset=count)`). Fewer when the source holds fewer."""
    if count < 0 or offset < 0:
        raise ValueError("count and offset must not be negative")
    texts = _shuffled((source or DEFAULT_SOURCE).resolve(), seed)
    return list(texts[offset : offset + count])


QUERY_REGION = 1000  # queries come from the shuffle's last texts, outside any corpus short of the whole source


def query_texts(count: int, source: Path | None = None, seed: int = 0) -> list[str]:
    """`count` texts from the end of the source's seeded shuffle (the first `count` of its last
    max(count, 1000)): queries outside every corpus of `distractor_texts` short of the whole
    source, the same whatever the corpus size, and 500 of them the first half of 1000."""
    texts = _shuffled((source or DEFAULT_SOURCE).resolve(), seed)
    start = max(0, len(texts) - max(count, QUERY_REGION))
    return list(texts[start : start + count])


def embed_all(embedder: Embedder, texts: Sequence[str], batch: int = 512, progress: bool = True) -> np.ndarray:
    """`embedder`'s passage vectors of `texts`, in batches of similar length (a model pads a batch
    to its longest text), with progress on stderr; in the order of `texts`."""
    out = np.empty((len(texts), embedder.dimensions), dtype=np.float32)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    t0 = time.perf_counter()
    for start in range(0, len(order), batch):
        part = order[start : start + batch]
        out[part] = np.asarray(embedder.embed_passages([texts[i] for i in part]), dtype=np.float32)
        if progress and (start // batch) % 10 == 0:
            done = min(start + batch, len(texts))
            print(f"embedded {done}/{len(texts)} in {time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
    return out


def embed_cached(texts: Sequence[str], cache_dir: Path, batch: int = 512, progress: bool = True) -> np.ndarray:
    """The local model's passage vectors of `texts`, computed once into the benchmark cache."""
    from embed_cache import CachedEmbedder

    from memento.embeddings.local import LocalE5Embedder

    return embed_all(CachedEmbedder(LocalE5Embedder(), cache_dir), texts, batch, progress)


def distractor_rows(
    factory: FragmentFactory,
    texts: Sequence[str],
    vectors: np.ndarray | None,
    *,
    agent: str,
    model: str | None,
    created_at: Sequence[datetime],
    topic: str = "notes",
) -> list[dict[str, object]]:
    """Bulk-import rows (the BulkStore `fragments` table) of one memory per text, drafted by the
    service's own FragmentFactory (redaction, keywords, hash, tokens), with its vector when given.
    Texts whose redacted content comes out empty are skipped."""
    if vectors is not None and len(vectors) != len(texts):
        raise ValueError(f"{len(texts)} texts but {len(vectors)} vectors")
    if len(created_at) != len(texts):
        raise ValueError(f"{len(texts)} texts but {len(created_at)} creation times")
    rows: list[dict[str, object]] = []
    for i, text in enumerate(texts):
        draft = factory.draft(content=text, topic=topic, type_=FragmentType.FACT, created_at=created_at[i])
        if not draft.content:
            continue
        record = new_record(NewFragment(draft, agent))
        rows.append(
            {
                "id": draft.id,
                "content": draft.content,
                "topic": draft.topic,
                "keywords": draft.keywords,
                "type": draft.type.value,
                "importance": draft.importance,
                "content_hash": draft.content_hash,
                "source": None,
                "linked_to": [],
                "agent_id": agent,
                "access_count": 0,
                "created_at": draft.created_at,
                "ttl_tier": draft.ttl_tier.value,
                "estimated_tokens": draft.estimated_tokens,
                "utility_score": 1.0,
                "is_anchor": False,
                **record,
                "embedding": None if vectors is None else vectors[i],
                "embedding_model": model,
            }
        )
    return rows


def spread_before(first: datetime, count: int, days: float = 365.0, seed: int = 0) -> list[datetime]:
    """`count` creation times spread at random over the `days` before `first` (all strictly before it)."""
    rng = random.Random(seed)
    return [first - timedelta(seconds=1 + rng.random() * days * 86400) for _ in range(count)]


def import_distractors(store: AppStore, rows: Sequence[dict[str, object]], *, before: datetime, batch: int = 5000, seed: int = 0) -> int:
    """Put `rows` (from `distractor_rows`, reusable across stores) into the store through its bulk
    import, one transaction per batch (the vector index catches up from the change log), each
    re-dated at random within the year before `before`. How many were inserted (a row whose id or
    content another memory already holds is skipped)."""
    created = spread_before(before, len(rows), seed=seed)
    inserted = 0
    for start in range(0, len(rows), batch):
        dated = [
            dict(row, created_at=when, tier_since=when) for row, when in zip(rows[start : start + batch], created[start : start + batch])
        ]
        inserted += store.import_rows("fragments", dated)
    return inserted


def main() -> int:
    from embed_cache import DEFAULT_DIR

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--distractor-source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--embed", action="store_true", help="embed the texts into the cache")
    parser.add_argument("--embed-cache", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--batch", type=int, default=512)
    args = parser.parse_args()
    texts = distractor_texts(args.count, args.distractor_source, args.seed, args.offset)
    print(f"{len(texts)} texts from {args.distractor_source} (seed {args.seed}, offset {args.offset})")
    for text in texts[:5]:
        print("  " + text[:100])
    if args.embed:
        vectors = embed_cached(texts, args.embed_cache, args.batch)
        print(f"{len(vectors)} vectors of {vectors.shape[1]} dimensions cached in {args.embed_cache}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
