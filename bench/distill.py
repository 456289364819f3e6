"""Distillation quality on a small labelled transcript set (bench/data/distill/*.json).

    PYTHONPATH=src python bench/distill.py            # the heuristic sieve, and the LLM when MEMENTO_LLM_URL is set
    PYTHONPATH=src python bench/distill.py --verbose  # every candidate and label, matched or not
    PYTHONPATH=src python bench/distill.py --pairs    # the near-duplicate rule on bench/data/distill/pairs.json

Each transcript lists what a careful person would keep (`expected`: content and 003 type). The
extractor's candidates are matched one to one with those labels: a candidate matches a label when
the bundled e5 model's cosine of the two (passages) is at least MATCH_COSINE *and* the candidate
contains at least MATCH_COVERAGE of the label's terms (stems and Hangul words, stop words left
out). The best-scoring pairs are taken first. Precision = matched candidates / candidates, recall
= matched labels / labels; type accuracy is over the matched pairs. The LLM path is the server's
(distill_llm: the same prompt and strict reading; an unusable answer falls back to the sieve, as
in the server, and is counted).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memento.analysis import query_terms
from memento.embeddings import LocalE5Embedder
from memento.errors import Unavailable
from memento.llm import ChatCompletions
from memento.protocol_face.distill import same_meaning
from memento.protocol_face.distill_heuristic import Candidate, extract
from memento.protocol_face.distill_llm import InvalidAnswer, llm_extract
from memento.retrieval.search import BASELINES

DATA = Path(__file__).resolve().parent / "data" / "distill"
MATCH_COSINE = 0.90
MATCH_COVERAGE = 0.5
LIMIT = 50  # the sieve is not capped here: what it finds is measured


@dataclass
class Tally:
    candidates: int = 0
    labels: int = 0
    matched: int = 0
    typed: int = 0
    fallbacks: int = 0

    def add(self, other: Tally) -> None:
        for name in ("candidates", "labels", "matched", "typed", "fallbacks"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def row(self, name: str, transcripts: int) -> str:
        p = self.matched / self.candidates if self.candidates else 0.0
        r = self.matched / self.labels if self.labels else 0.0
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        typed = self.typed / self.matched if self.matched else 0.0
        return (
            f"| {name} | {transcripts} | {self.labels} | {self.candidates} | {self.matched} | {100 * p:.1f} | {100 * r:.1f} |"
            f" {100 * f1:.1f} | {100 * typed:.1f} |"
        )


def coverage(label: str, candidate: str) -> float:
    terms = set(query_terms(label))
    return len(terms & set(query_terms(candidate))) / len(terms) if terms else 0.0


def match(e5: LocalE5Embedder, labels: list[dict[str, str]], found: list[Candidate]) -> list[tuple[int, int, float]]:
    """(label index, candidate index, cosine) of the one-to-one matches, best first."""
    if not labels or not found:
        return []
    lv = e5.embed_passages([x["content"] for x in labels])
    cv = e5.embed_passages([c.content for c in found])
    cos = np.asarray(lv @ cv.T)
    pairs = [
        (float(cos[i, j]), i, j)
        for i in range(len(labels))
        for j in range(len(found))
        if cos[i, j] >= MATCH_COSINE and coverage(labels[i]["content"], found[j].content) >= MATCH_COVERAGE
    ]
    used_l: set[int] = set()
    used_c: set[int] = set()
    out = []
    for score, i, j in sorted(pairs, reverse=True):
        if i not in used_l and j not in used_c:
            used_l.add(i)
            used_c.add(j)
            out.append((i, j, score))
    return out


def measure(e5: LocalE5Embedder, doc: dict[str, object], found: list[Candidate], verbose: bool) -> Tally:
    labels: list[dict[str, str]] = doc["expected"]  # type: ignore[assignment]
    matches = match(e5, labels, found)
    tally = Tally(candidates=len(found), labels=len(labels), matched=len(matches))
    tally.typed = sum(found[j].type == labels[i]["type"] for i, j, _ in matches)
    if verbose:
        print(f"\n## {doc['id']}")
        hit_c = {j: (i, s) for i, j, s in matches}
        hit_l = {i for i, _, _ in matches}
        for j, c in enumerate(found):
            mark = f"= label {hit_c[j][0]} ({hit_c[j][1]:.3f})" if j in hit_c else "  (no label)"
            print(f"  cand {j} [{c.type}] {c.content}  {mark}")
        for i, x in enumerate(labels):
            if i not in hit_l:
                print(f"  MISSED label {i} [{x['type']}] {x['content']}")
    return tally


def run(e5: LocalE5Embedder, docs: list[dict[str, object]], extractor: str, model: ChatCompletions | None, verbose: bool) -> None:
    totals = {"all": Tally(), "en": Tally(), "ko": Tally()}
    counts = {"all": 0, "en": 0, "ko": 0}
    for doc in docs:
        turns: list[tuple[str | None, str]] = [(m["role"], m["content"]) for m in doc["messages"]]  # type: ignore[attr-defined]
        fallback = 0
        if model is None:
            found = extract(turns, LIMIT)
        else:
            try:
                found = llm_extract(model, turns, LIMIT)
            except (Unavailable, InvalidAnswer) as exc:
                print(f"  {doc['id']}: the model's answer was not used ({str(exc)[:200]}); the sieve instead", file=sys.stderr)
                found, fallback = extract(turns, LIMIT), 1
        tally = measure(e5, doc, found, verbose)
        tally.fallbacks = fallback
        for key in ("all", str(doc["language"])):
            totals[key].add(tally)
            counts[key] += 1
    print(f"\n{extractor}:\n")
    print("| set | transcripts | labels | candidates | matched | precision | recall | F1 | type accuracy |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key, name in (("all", "all"), ("en", "English"), ("ko", "Korean")):
        print(totals[key].row(name, counts[key]))
    if model is not None:
        print(f"\nanswers not used (fell back to the sieve): {totals['all'].fallbacks} of {counts['all']}")


def pairs(e5: LocalE5Embedder) -> None:
    doc = json.loads((DATA / "pairs.json").read_text())
    baseline = BASELINES.get(e5.name, 0.0)
    confusion = {("same", True): 0, ("same", False): 0, ("different", True): 0, ("different", False): 0}
    for a, b, label in doc["pairs"]:
        v = e5.embed_passages([a, b])
        judged = same_meaning(a, b, float(v[0] @ v[1]), baseline) is not None
        confusion[(label, judged)] += 1
        if judged != (label == "same"):
            print(f"  wrong: {label:9} cos {float(v[0] @ v[1]):.3f}  {a} | {b}")
    same, diff = confusion[("same", True)] + confusion[("same", False)], confusion[("different", True)] + confusion[("different", False)]
    print(f"\nnear-duplicate rule on {same + diff} labelled pairs ({e5.name}, baseline {baseline}):")
    print(f"  'same' pairs skipped as duplicates: {confusion[('same', True)]} of {same}")
    print(f"  'different' pairs wrongly skipped:  {confusion[('different', True)]} of {diff}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--verbose", action="store_true", help="print every candidate and label")
    parser.add_argument("--pairs", action="store_true", help="measure the near-duplicate rule instead")
    args = parser.parse_args()
    e5 = LocalE5Embedder()
    if args.pairs:
        pairs(e5)
        return
    docs = [json.loads(p.read_text()) for p in sorted(DATA.glob("*.json")) if p.name != "pairs.json"]
    print(f"{len(docs)} transcripts, {sum(len(d['expected']) for d in docs)} labelled memories; match: e5 cosine >= {MATCH_COSINE}")
    print(f"and >= {MATCH_COVERAGE:.0%} of the label's terms in the candidate, one to one, best first")
    run(e5, docs, "heuristic sieve", None, args.verbose)
    url = os.environ.get("MEMENTO_LLM_URL", "").strip()
    if not url:
        print("\nLLM path: not measured (MEMENTO_LLM_URL is not set: no model endpoint on this machine).")
        return
    model = ChatCompletions(
        url,
        model=os.environ.get("MEMENTO_LLM_MODEL", ""),
        api_key=os.environ.get("MEMENTO_LLM_API_KEY", ""),
        timeout_s=float(os.environ.get("MEMENTO_LLM_TIMEOUT_S", "120")),
        temperature=0.0,
    )
    run(e5, docs, f"LLM ({model.model or 'server default'} at {url}, temperature 0)", model, args.verbose)


if __name__ == "__main__":
    main()
