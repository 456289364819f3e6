"""LoCoMo retrieval benchmark through Memento's real write and recall path.

Protocol: ../shared/bench/README.md. One fresh store per conversation; every turn is one
memory `"{speaker}: {text}"` (+ image caption) created at its session's date; "now" is the
conversation's last session date; recall top 50 per question; R@k, any@k, NDCG@10, MRR.

    python bench/locomo.py [--data FILE] [--limit-conversations N] [--embedder local|hash|none]
                           [--mode keyword|semantic|hybrid] [--profile default|004|003] [--ablation]
                           [--distractors N] [--distractor-source FILE] [--distractor-seed S]
                           [--keywords split|only] [--recall-limit N]

Without --mode, recall runs 000's cascade (the default); with it, the 001 search mode.
--profile 004 ranks the cascade with seed 004's score (MEMENTO_SCORE_PROFILE=004); --profile 003 with
seed 003's relevance decay (MEMENTO_SCORE_PROFILE=003). --ablation prints one line per lever of
the cascade (score fusion, conversational context, the time a query names) switched off, or
built up from the ranking before them. The model's vectors are cached on disk (bench/embed_cache.py),
so a rerun takes seconds; the figures are the same with --no-embed-cache.
--distractors N gives each conversation's agent N unrelated memories first (bench/distractors.py, with
their vectors; bulk-imported once into a template store, dated within the year before the earliest
first session, and copied per conversation).
--keywords passes `keywords` split from the question as a client would (lower-cased words minus a
small stop list): `split` sends them with the text, `only` sends them alone (no text).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

from distractors import DEFAULT_SOURCE as DISTRACTOR_SOURCE
from distractors import distractor_rows, distractor_texts, embed_all, import_distractors
from embed_cache import DEFAULT_DIR, CachedEmbedder
from locomo_data import locomo_dev

from memento.app import build_app
from memento.embeddings.factory import build_embedder
from memento.embeddings.protocol import Embedder
from memento.factory import FragmentFactory
from memento.graph import SearchMode
from memento.models import DEFAULT_AGENT, CallContext, FragmentType, RecallInput, RememberInput
from memento.settings import Settings

DEFAULT_DATA = locomo_dev()
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
KS = (1, 5, 10, 25, 50)
# A client's keyword splitting: lower-cased words minus a small English stop list (not the server's).
CLIENT_STOPWORDS = frozenset(
    """a an and are as at be by did do does for from had has have he her his how i in is it its of on or she
    that the their they this to was were what when where which who whom why will with would you your""".split()
)


def split_keywords(question: str) -> list[str]:
    """The keywords a client would pass for `question`."""
    words = re.findall(r"[\w']+", question.lower())
    return list(dict.fromkeys(w.strip("'") for w in words if w.strip("'") and w not in CLIENT_STOPWORDS))


def parse_date(text: str) -> datetime:
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def normalise_ids(evidence: list[str]) -> list[str]:
    out = []
    for item in evidence:
        for part in str(item).split(";"):
            m = re.match(r"\s*D:?(\d+):0*(\d+)\s*$", part.strip())
            if m:
                out.append(f"D{int(m.group(1))}:{int(m.group(2))}")
    return list(dict.fromkeys(out))


def sessions(conversation: dict) -> list[tuple[datetime, list[dict]]]:
    out = []
    for key, turns in conversation.items():
        m = re.fullmatch(r"session_(\d+)", key)
        if m and isinstance(turns, list):
            out.append((int(m.group(1)), parse_date(conversation[f"{key}_date_time"]), turns))
    return [(date, turns) for _, date, turns in sorted(out, key=lambda t: t[0])]


def turn_text(turn: dict) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [image: {turn['blip_caption']}]"
    return text


def evaluate_conversation(
    sample: dict,
    settings: Settings,
    embedder_choice: str,
    workdir: Path,
    mode: SearchMode | None = None,
    cache: Path | None = None,
    distractors: tuple[Path, int] | None = None,
    keywords: str | None = None,
    limit: int = 50,
) -> tuple[list[dict], dict]:
    sess = sessions(sample["conversation"])
    now = sess[-1][0]
    path = workdir / (sample["sample_id"] + ".db")
    settings = settings.model_copy(update={"database_url": f"sqlite:///{path}"})
    t0 = time.perf_counter()
    placed = 0
    if distractors:  # the agent starts with the unrelated memories, all older than the conversation
        template, placed = distractors
        copy_store(template, path)
    distract_s = time.perf_counter() - t0
    app = build_app(settings, embedder=_embedder(embedder_choice, settings, cache), clock=lambda: now)
    ctx = CallContext()
    id_to_dia: dict[str, list[str]] = defaultdict(list)
    t0 = time.perf_counter()
    turns = 0
    for date, session_turns in sess:
        for turn in session_turns:
            result = app.service.remember(
                RememberInput(content=turn_text(turn), topic="conversation", type=FragmentType.FACT, createdAt=date, source=turn["dia_id"]),
                ctx,
            )
            id_to_dia[result.id].append(turn["dia_id"])
            turns += 1
    app.service.settle(600)  # every turn embedded before the first question (the outbox embeds after the write)
    ingest_s = time.perf_counter() - t0
    rows = []
    t1 = time.perf_counter()
    for qa in sample["qa"]:
        gold = normalise_ids(qa.get("evidence") or [])
        if not gold:
            continue
        split = split_keywords(qa["question"]) if keywords else None
        text = None if keywords == "only" else qa["question"]
        inp = RecallInput(text=text, keywords=split, limit=limit, tokenBudget=100_000, includeLinks=False, mode=mode)
        found = app.service.recall(inp, ctx)
        ranked: list[str] = []
        for f in found.fragments:
            for dia in id_to_dia.get(f.id, []):
                if dia not in ranked:
                    ranked.append(dia)
        rows.append({"category": qa.get("category"), "gold": gold, "ranked": ranked})
    query_s = time.perf_counter() - t1
    app.close()
    return rows, {
        "turns": turns,
        "ingest_s": ingest_s,
        "queries": len(rows),
        "query_s": query_s,
        "distractors": placed,
        "distract_s": distract_s,
    }


def _embedder(choice: str, settings: Settings, cache: Path | None) -> Embedder | None:
    embedder = None if choice == "none" else build_embedder(settings.model_copy(update={"embedding_provider": choice}))
    if embedder is not None and cache is not None:
        return CachedEmbedder(embedder, cache)
    return embedder


def distractor_memories(
    count: int, source: Path, seed: int, embedder_choice: str, settings: Settings, cache: Path | None
) -> list[dict[str, object]] | None:
    """`count` distractor rows drafted and embedded once (the model's vectors cached); None for none."""
    if count <= 0:
        return None
    texts = distractor_texts(count, source, seed)
    embedder = _embedder(embedder_choice, settings, cache)
    vectors = embed_all(embedder, texts) if embedder is not None else None
    epoch = [datetime(2000, 1, 1, tzinfo=UTC)] * len(texts)  # re-dated on import
    return distractor_rows(
        FragmentFactory(), texts, vectors, agent=DEFAULT_AGENT, model=embedder.name if embedder else None, created_at=epoch
    )


def distractor_store(
    rows: list[dict[str, object]], workdir: Path, settings: Settings, embedder_choice: str, cache: Path | None, before: datetime
) -> tuple[Path, int]:
    """A store holding only the distractors, in the agent the conversations use, each created
    within the year before `before` (the earliest first session of the run), through the bulk
    import; its vector index built and saved. Every conversation starts from a copy of it, so
    100k distractors cost one import and one graph build per run. The path and how many."""
    path = workdir / "distractors.db"
    settings = settings.model_copy(update={"database_url": f"sqlite:///{path}"})
    app = build_app(settings, embedder=_embedder(embedder_choice, settings, cache))
    try:
        placed = import_distractors(app.store, rows, before=before)
        vectors = getattr(app.store, "vectors", None)
        if vectors is not None:
            vectors.size(DEFAULT_AGENT)
            vectors.ready(DEFAULT_AGENT)  # the graph, built once (in the background) and saved
    finally:
        app.close()
    return path, placed


def copy_store(template: Path, path: Path) -> None:
    """A closed SQLite store (its database and the saved vector indexes beside it) copied to `path`."""
    for suffix in ("", "-wal", "-shm"):
        if template.with_name(template.name + suffix).exists():
            shutil.copyfile(template.with_name(template.name + suffix), path.with_name(path.name + suffix))
    folder = template.with_name(template.name + ".vectors")
    if folder.exists():
        shutil.copytree(folder, path.with_name(path.name + ".vectors"))


def metrics(rows: list[dict]) -> dict[str, float]:
    out: dict[str, float] = {"n": len(rows)}
    if not rows:
        return out
    for k in KS:
        out[f"R@{k}"] = 100 * sum(len(set(r["gold"]) & set(r["ranked"][:k])) / len(r["gold"]) for r in rows) / len(rows)
    for k in (5, 10):
        out[f"any@{k}"] = 100 * sum(bool(set(r["gold"]) & set(r["ranked"][:k])) for r in rows) / len(rows)
    ndcg = mrr = 0.0
    for r in rows:
        gold = set(r["gold"])
        dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(r["ranked"][:10]) if d in gold)
        ideal = sum(1 / math.log2(i + 2) for i in range(min(len(gold), 10)))
        ndcg += dcg / ideal
        mrr += next((1 / (i + 1) for i, d in enumerate(r["ranked"]) if d in gold), 0.0)
    out["NDCG@10"] = 100 * ndcg / len(rows)
    out["MRR"] = 100 * mrr / len(rows)
    return out


# --ablation: each lever of the cascade off (or on) against the default. A variant is a name, the
# MEMORY_CONFIG.ranking fields it sets and the embedder it uses (None: the run's --embedder).
ABLATION: list[tuple[str, dict[str, object], str | None]] = [
    ("default (all levers)", {}, None),
    (
        "before issue 14: rank fusion, semanticWeight 0.3, no context, no time",
        {"fusion": "rrf", "semanticWeight": 0.3, "contextBefore": 0.0, "contextAfter": 0.0, "temporalBoost": 0.0},
        None,
    ),
    ("+ score fusion (linear, semanticWeight 0.75)", {"contextBefore": 0.0, "contextAfter": 0.0, "temporalBoost": 0.0}, None),
    ("+ score fusion + context", {"temporalBoost": 0.0}, None),
    ("default - score fusion (rrf, 0.3)", {"fusion": "rrf", "semanticWeight": 0.3}, None),
    ("default - context", {"contextBefore": 0.0, "contextAfter": 0.0}, None),
    ("default - context after (before only)", {"contextAfter": 0.0}, None),
    ("default - second neighbour (contextReach 1)", {"contextReach": 1}, None),
    ("default - time named", {"temporalBoost": 0.0}, None),
    ("keyword tiers only (no embedder)", {}, "none"),
]


def run(
    data: list[dict],
    settings: Settings,
    embedder: str,
    mode: SearchMode | None,
    cache: Path | None,
    quiet: bool = False,
    distractors: list[dict[str, object]] | None = None,
    keywords: str | None = None,
    limit: int = 50,
) -> list[dict]:
    """Every conversation through a fresh store (holding the distractors first, when given); the
    rows of all questions."""
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        template = None
        if distractors:
            first = min(sessions(sample["conversation"])[0][0] for sample in data)
            t0 = time.perf_counter()
            template = distractor_store(distractors, Path(tmp), settings, embedder, cache, first)
            if not quiet:
                print(f"{template[1]} distractors imported and indexed in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        for sample in data:
            conv_rows, info = evaluate_conversation(sample, settings, embedder, Path(tmp), mode, cache, template, keywords, limit)
            rows += conv_rows
            if not quiet:
                print(
                    f"{sample['sample_id']}: {info['distractors']} distractors in {info['distract_s']:.1f}s, "
                    f"{info['turns']} turns ingested in {info['ingest_s']:.1f}s, "
                    f"{info['queries']} questions in {info['query_s']:.1f}s",
                    file=sys.stderr,
                )
    return rows


def ablation(data: list[dict], base: Settings, args: argparse.Namespace, cache: Path | None) -> dict[str, dict]:
    """Print one line per variant of ABLATION: R@1/5/10 overall and R@5 per category."""
    cats = [CATEGORIES[c] for c in sorted(CATEGORIES)]
    print("| variant | R@1 | R@5 | R@10 | " + " | ".join(f"{c} R@5" for c in cats) + " |")
    print("|---" * (4 + len(cats)) + "|")
    out = {}
    for name, ranking, embedder in ABLATION:
        config = base.memory.model_copy(update={"ranking": base.memory.ranking.model_copy(update=ranking)})
        settings = base.model_copy(update={"memory": config})
        rows = run(data, settings, embedder or args.embedder, None, cache, quiet=True, limit=args.recall_limit)
        overall = metrics(rows)
        per = {c: metrics([r for r in rows if r["category"] == k]) for k, c in CATEGORIES.items()}
        out[name] = {"overall": overall, **per}
        print(
            f"| {name} | {overall['R@1']:.1f} | {overall['R@5']:.1f} | {overall['R@10']:.1f} | "
            + " | ".join(f"{per[c]['R@5']:.1f}" for c in cats)
            + " |",
            flush=True,
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--embedder", choices=["local", "hash", "none"], default="local")
    parser.add_argument("--mode", choices=["keyword", "semantic", "hybrid"], default=None, help="a 001 search mode (default: the cascade)")
    parser.add_argument("--profile", choices=["default", "004", "003"], default="default", help="MEMENTO_SCORE_PROFILE of the cascade")
    parser.add_argument(
        "--keywords", choices=["split", "only"], default=None, help="keywords split from the question: with the text, or alone"
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument(
        "--embed-cache",
        type=Path,
        default=DEFAULT_DIR,
        help="keep the model's vectors here between runs (figures unchanged; faster reruns)",
    )
    parser.add_argument("--no-embed-cache", action="store_true", help="embed everything afresh")
    parser.add_argument("--ablation", action="store_true", help="one line per lever of the cascade (ABLATION) instead of the table")
    parser.add_argument(
        "--distractors",
        type=int,
        default=0,
        help="put N unrelated memories (bench/distractors.py) into each conversation's agent, older than its first session",
    )
    parser.add_argument("--distractor-source", type=Path, default=DISTRACTOR_SOURCE, help="one text a line (.tsv: 5th column)")
    parser.add_argument("--distractor-seed", type=int, default=0)
    parser.add_argument(
        "--recall-limit",
        type=int,
        default=50,
        help="recall's limit (the protocol's 50; R@k for k above it counts what 50 would add as missed)",
    )
    args = parser.parse_args()
    raw = args.data.read_bytes()
    data = json.loads(raw)[: args.limit_conversations]
    settings = Settings(MEMENTO_SQLITE_SYNCHRONOUS="NORMAL", MEMENTO_SCORE_PROFILE=args.profile)
    mode = SearchMode(args.mode) if args.mode else None
    cache = None if args.no_embed_cache else args.embed_cache
    distractor_rows_ = distractor_memories(args.distractors, args.distractor_source, args.distractor_seed, args.embedder, settings, cache)
    print(f"data {args.data.name} sha256 {hashlib.sha256(raw).hexdigest()}")
    if args.ablation:
        print(
            f"ablation: embedder={args.embedder}, recall(text=question, limit={args.recall_limit}, includeLinks=false), profile={args.profile}"
        )
        table = ablation(data, settings, args, cache)
        if args.json:
            args.json.write_text(json.dumps(table, indent=2))
        return 0
    rows = run(data, settings, args.embedder, mode, cache, distractors=distractor_rows_, keywords=args.keywords, limit=args.recall_limit)
    print(
        f"settings: embedder={args.embedder}, recall(text=question, limit={args.recall_limit}, includeLinks=false, mode={args.mode or 'cascade'}, keywords={args.keywords or 'none'}), "
        f"profile={args.profile}, ranking={settings.memory.ranking.model_dump()}"
    )
    if args.distractors:
        print(
            f"distractors: {len(distractor_rows_ or [])} per conversation from {args.distractor_source.name} (seed {args.distractor_seed}),"
            " created within the year before the earliest first session"
        )
    header = ["category", "n", *[f"R@{k}" for k in KS], "any@5", "any@10", "NDCG@10", "MRR"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    groups = [("overall", rows)] + [(CATEGORIES[c], [r for r in rows if r["category"] == c]) for c in sorted(CATEGORIES)]
    table = {}
    for name, subset in groups:
        m = metrics(subset)
        table[name] = m
        print("| " + " | ".join([name, str(int(m["n"]))] + [f"{m.get(h, 0):.1f}" for h in header[2:]]) + " |")
    if args.json:
        args.json.write_text(json.dumps(table, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
