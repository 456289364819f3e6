"""How well recall's `coverage` says whether the answer is among the results (docs/search.md).

Over LoCoMo dev (one store per conversation, built as bench/locomo.py builds it), every question
is asked with recall(limit=K, verbose=True) and the coverage features are read from the result:

- answerable questions (categories 1-4): label 1 when a gold evidence turn is in the top K;
- never-stored questions (bench/data/never_stored.json, asked against every store): label 0;
- cross-conversation questions (another conversation's answerable questions that name none of
  this store's speakers): answers absent, evaluation only;
- adversarial questions (category 5: the premise is false, so no answer exists): evaluation only.

The logistic model is fitted on the answerable and never-stored rows. Figures are out of sample:
leave one conversation out (fit on four stores, predict the fifth). Reported: AUROC for
(i) answerable found vs not found, (ii) found vs adversarial, (iii) found vs never-stored,
(iv) found vs cross-conversation; the calibration table and ECE; the share flagged noGoodMatch
per threshold. The shipped constants (retrieval/coverage.py) are scored too.

    python bench/coverage.py [--embedder local|none] [--embed-cache DIR] [--fit] [--limit-conversations N]

--fit refits on every row and writes the constants into src/memento/retrieval/coverage.py: the
vector model's with --embedder local (the default), the model without a vector tier's with none.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from embed_cache import DEFAULT_DIR, CachedEmbedder
from locomo import DEFAULT_DATA, normalise_ids, sessions, turn_text

from memento.app import build_app
from memento.embeddings.factory import build_embedder
from memento.models import CallContext, FragmentType, RecallInput, RememberInput
from memento.retrieval import coverage as model
from memento.settings import Settings

K = 10  # coverage is calibrated for the first K results
CROSS_PER_STORE = 60
NEVER = Path(__file__).resolve().parent / "data" / "never_stored.json"
MODULE = Path(__file__).resolve().parents[1] / "src" / "memento" / "retrieval" / "coverage.py"
L2 = 1e-2  # ridge penalty on the weights (not the intercept): keeps the fit stable and reproducible


def collect(
    sample: dict, others: Sequence[dict], never: Sequence[str], settings: Settings, vectors: bool, cache: Path | None, workdir: Path
) -> list[dict]:
    """Every question of one store with its features, kind and label."""
    sess = sessions(sample["conversation"])
    now = sess[-1][0]
    settings = settings.model_copy(update={"database_url": f"sqlite:///{workdir / (sample['sample_id'] + '.db')}"})
    embedder = build_embedder(settings.model_copy(update={"embedding_provider": "local"})) if vectors else None
    if embedder is not None and cache is not None:
        embedder = CachedEmbedder(embedder, cache)
    app = build_app(settings, embedder=embedder, clock=lambda: now)
    ctx = CallContext()
    dia_of: dict[str, str] = {}
    for date, turns in sess:
        for turn in turns:
            new = RememberInput(
                content=turn_text(turn), topic="conversation", type=FragmentType.FACT, createdAt=date, source=turn["dia_id"]
            )
            dia_of[app.service.remember(new, ctx).id] = turn["dia_id"]
    app.service.settle(600)

    def ask(question: str) -> tuple[dict[str, float], float, list[str]]:
        found = app.service.recall(RecallInput(text=question, limit=K, tokenBudget=100_000, includeLinks=False, verbose=True), ctx)
        assert found.coverage_features is not None and found.coverage is not None
        return dict(found.coverage_features), found.coverage, [dia_of.get(f.id, "") for f in found.fragments]

    rows: list[dict] = []
    conv = sample["sample_id"]
    for qa in sample["qa"]:
        gold = normalise_ids(qa.get("evidence") or [])
        category = qa.get("category")
        if category == 5:
            feats, shipped, _ = ask(qa["question"])
            rows.append({"conv": conv, "kind": "adversarial", "label": 0, "features": feats, "shipped": shipped})
        elif gold:
            feats, shipped, ranked = ask(qa["question"])
            label = int(bool(set(gold) & set(ranked[:K])))
            rows.append({"conv": conv, "kind": "answerable", "label": label, "features": feats, "shipped": shipped})
    for question in never:
        feats, shipped, _ = ask(question)
        rows.append({"conv": conv, "kind": "never", "label": 0, "features": feats, "shipped": shipped})
    for question in cross_questions(sample, others)[:CROSS_PER_STORE]:
        feats, shipped, _ = ask(question)
        rows.append({"conv": conv, "kind": "cross", "label": 0, "features": feats, "shipped": shipped})
    app.close()
    return rows


def cross_questions(sample: dict, others: Sequence[dict]) -> list[str]:
    """Answerable questions of the other conversations that name neither of this store's speakers."""
    names = {sample["conversation"]["speaker_a"].lower(), sample["conversation"]["speaker_b"].lower()}
    out = []
    for other in others:
        for qa in other["qa"]:
            words = set(re.findall(r"[a-z]+", qa["question"].lower()))
            if qa.get("category") in (1, 2, 3, 4) and not words & names:
                out.append(qa["question"])
    # interleave the other conversations so the cap takes from each
    per = [[q for q in out if q in {x["question"] for x in o["qa"]}] for o in others]
    mixed = [q for group in zip(*per, strict=False) for q in group]
    return list(dict.fromkeys(mixed))


# ---------------------------------------------------------------- model and metrics


def matrix(rows: Sequence[dict]) -> np.ndarray:
    return np.array([[r["features"][name] for name in model.FEATURES] for r in rows], dtype=float)


def fit(rows: Sequence[dict]) -> tuple[float, list[float]]:
    """Ridge-penalised logistic regression with weights kept non-negative (deterministic): a
    feature whose weight comes out negative is dropped and the rest refitted, until none is."""
    x = matrix(rows)
    y = np.array([r["label"] for r in rows], dtype=float)
    kept = list(range(x.shape[1]))
    while True:
        beta = newton(np.hstack([np.ones((len(rows), 1)), x[:, kept]]), y)
        negative = [kept[i] for i, b in enumerate(beta[1:]) if b < 0]
        if not negative:
            break
        kept = [k for k in kept if k not in negative]
    weights = [0.0] * x.shape[1]
    for i, k in enumerate(kept):
        weights[k] = float(beta[1 + i])
    return float(beta[0]), weights


def newton(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Logistic regression by Newton's method, the ridge penalty on every column but the first."""
    beta = np.zeros(x.shape[1])
    penalty = np.full(x.shape[1], L2)
    penalty[0] = 0.0
    for _ in range(100):
        p = 1 / (1 + np.exp(-(x @ beta)))
        grad = x.T @ (p - y) + penalty * beta
        hess = x.T @ (x * (p * (1 - p))[:, None]) + np.diag(penalty)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.max(np.abs(step)) < 1e-10:
            break
    return beta


def predict(rows: Sequence[dict], intercept: float, weights: Sequence[float]) -> list[float]:
    return [model.probability(r["features"], intercept, weights) for r in rows]


def auroc(positives: Sequence[float], negatives: Sequence[float]) -> float:
    """P(a positive scores above a negative), ties counting half."""
    if not positives or not negatives:
        return float("nan")
    neg = np.sort(np.array(negatives))
    wins = 0.0
    for p in positives:
        below = np.searchsorted(neg, p, side="left")
        equal = np.searchsorted(neg, p, side="right") - below
        wins += below + equal / 2
    return wins / (len(positives) * len(negatives))


def calibration(scores: Sequence[float], labels: Sequence[int], bins: int = 10) -> tuple[list[tuple[str, int, float, float]], float]:
    """(bin, n, mean predicted, observed rate) per bin, and the expected calibration error."""
    table = []
    ece = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        idx = [i for i, s in enumerate(scores) if lo <= s < hi or (b == bins - 1 and s == 1.0)]
        if not idx:
            continue
        mean = sum(scores[i] for i in idx) / len(idx)
        rate = sum(labels[i] for i in idx) / len(idx)
        table.append((f"{lo:.1f}-{hi:.1f}", len(idx), mean, rate))
        ece += len(idx) / len(scores) * abs(mean - rate)
    return table, ece


def out_of_sample(rows: list[dict]) -> list[float]:
    """Leave one conversation out: each store's rows scored by a model fitted on the others."""
    scores = [0.0] * len(rows)
    for conv in sorted({r["conv"] for r in rows}):
        train = [r for r in rows if r["conv"] != conv and r["kind"] in ("answerable", "never")]
        intercept, weights = fit(train)
        for i, r in enumerate(rows):
            if r["conv"] == conv:
                scores[i] = model.probability(r["features"], intercept, weights)
    return scores


def report(title: str, rows: list[dict], scores: Sequence[float]) -> None:
    def of(kind: str, label: int | None = None) -> list[float]:
        return [s for r, s in zip(rows, scores, strict=True) if r["kind"] == kind and (label is None or r["label"] == label)]

    found, missed = of("answerable", 1), of("answerable", 0)
    print(f"\n## {title}")
    print("| comparison | positives | negatives | AUROC |")
    print("|---|---|---|---|")
    for name, neg in (
        ("(i) answerable: found vs not found in top 10", missed),
        ("(ii) found vs adversarial (category 5)", of("adversarial")),
        ("(iii) found vs never stored", of("never")),
        ("(iv) found vs another conversation's questions", of("cross")),
        ("all answerable vs never stored", None),
    ):
        pos = found if neg is not None else found + missed
        neg = neg if neg is not None else of("never")
        print(f"| {name} | {len(pos)} | {len(neg)} | {auroc(pos, neg):.3f} |")
    fitted = [i for i, r in enumerate(rows) if r["kind"] in ("answerable", "never")]
    table, ece = calibration([scores[i] for i in fitted], [rows[i]["label"] for i in fitted])
    print("\nCalibration (answerable and never-stored questions; label: the answer is in the top 10)")
    print("| predicted | n | mean predicted | observed |")
    print("|---|---|---|---|")
    for name, n, mean, rate in table:
        print(f"| {name} | {n} | {mean:.2f} | {rate:.2f} |")
    print(f"ECE {ece:.3f}")
    print("\nShare flagged noGoodMatch (coverage below the threshold)")
    print("| threshold | found | not found | adversarial | never stored | other conversation |")
    print("|---|---|---|---|---|---|")
    for t in (0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5):
        cells = [
            100 * sum(s < t for s in group) / max(1, len(group)) for group in (found, missed, of("adversarial"), of("never"), of("cross"))
        ]
        print(f"| {t:.2f} | " + " | ".join(f"{c:.0f}%" for c in cells) + " |")


def write_constants(intercept: float, weights: Sequence[float], vectors: bool) -> None:
    """Replace a fitted block of retrieval/coverage.py (the vector model's, or the one without a
    vector tier) with these constants."""
    text = MODULE.read_text()
    prefix, marker = ("", "--fit") if vectors else ("LEXICAL_", "--fit --embedder none")
    block = f"{prefix}INTERCEPT = {intercept:.3f}\n{prefix}WEIGHTS = ({', '.join(f'{w:.3f}' for w in weights)})\n"
    pattern = rf"(# bench/coverage.py {marker} \(begin\)\n).*?(# bench/coverage.py {marker} \(end\))"
    MODULE.write_text(re.sub(pattern, lambda m: m.group(1) + block + m.group(2), text, flags=re.S))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--embedder", choices=["local", "none"], default="local", help="none: no vector tier (the model without one)")
    parser.add_argument("--embed-cache", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--rows", type=Path, help="reuse (or, when absent, write) the collected rows here")
    parser.add_argument("--fit", action="store_true", help="refit on every row and write the constants into the module")
    args = parser.parse_args()
    if args.rows and args.rows.exists():
        rows = json.loads(args.rows.read_text())
    else:
        data = json.loads(args.data.read_bytes())[: args.limit_conversations]
        never = json.loads(NEVER.read_text())["questions"]
        settings = Settings(MEMENTO_SQLITE_SYNCHRONOUS="NORMAL")
        rows = []
        with tempfile.TemporaryDirectory() as tmp:
            for sample in data:
                others = [o for o in data if o is not sample]
                rows += collect(sample, others, never, settings, args.embedder == "local", args.embed_cache, Path(tmp))
                print(f"{sample['sample_id']}: {sum(r['conv'] == sample['sample_id'] for r in rows)} questions", file=sys.stderr)
        if args.rows:
            args.rows.write_text(json.dumps(rows))
    counts = {kind: sum(r["kind"] == kind for r in rows) for kind in ("answerable", "adversarial", "never", "cross")}
    print(f"rows {counts}; answerable found in top {K}: {sum(r['label'] for r in rows if r['kind'] == 'answerable')}")
    report("Out of sample (leave one conversation out)", rows, out_of_sample(rows))
    vectors = args.embedder == "local"
    shipped = (model.INTERCEPT, model.WEIGHTS) if vectors else (model.LEXICAL_INTERCEPT, model.LEXICAL_WEIGHTS)
    report(f"Shipped constants (intercept {shipped[0]}, weights {shipped[1]})", rows, [r["shipped"] for r in rows])
    intercept, weights = fit([r for r in rows if r["kind"] in ("answerable", "never")])
    named = ", ".join(f"{n} {w:.3f}" for n, w in zip(model.FEATURES, weights, strict=True))
    print(f"\nfit on every row: intercept {intercept:.3f}; {named}")
    if args.fit:
        write_constants(intercept, weights, vectors)
        print(f"wrote the constants into {MODULE}")
    return 0 if all(math.isfinite(w) for w in weights) else 1


if __name__ == "__main__":
    sys.exit(main())
