"""How well the skip list matches by meaning with the bundled model, and at which threshold.

    python bench/skip_meaning.py [--variant original|enpt]

Two hand-written sets (A and B, different entries and messages): each entry of a skip list, a
few messages that mean the same thing without sharing a word with it (each should match that
entry), and ordinary messages that should match none. Every (message, entry) pair that should not
match counts as a candidate false match. The script runs the face's own scoring
(`Skips.relative`, protocol_face/skips.py) on a temporary SQLite store, and the raw cosine for
comparison, and prints the share of paraphrases found and the false matches at a few thresholds.
docs/protocol.md "Skip list" quotes the figures; CALIBRATED_THRESHOLD was chosen from them.
"""

from __future__ import annotations

import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from memento.app import build_app
from memento.embeddings.local import LocalE5Embedder
from memento.models import CallContext
from memento.protocol_face.skips import CALIBRATED_THRESHOLD, SkipAddInput, meaning_text
from memento.settings import Settings

Entry = tuple[str, str]
Sets = dict[str, tuple[list[Entry], list[tuple[str, int]], list[str]]]

SETS: Sets = {
    "A": (
        [
            ("aurora alerts", "Kp too low to see from this latitude. Revisit when Kp > 4."),
            ("Hacker News post about Rust async runtimes", "Already read it twice; nothing new."),
            ("the flaky payment integration test", "Known upstream bug; tracked in a ticket, do not debug again."),
            ("회의록 정리", "이번 주는 다른 사람이 맡았다"),
            ("weather forecast checks", "Nothing changes before the weekend."),
            ("refactoring the login page", "Design team is redesigning it next month; wait."),
            ("upgrading the PostgreSQL major version", "Blocked until the hosting provider supports it."),
            ("stock price of ACME", "Checked this morning; no news until earnings."),
            ("emailing the landlord about the heater", "Already sent; waiting for a reply."),
            ("조깅 일정", "무릎 부상으로 2주간 쉰다"),
            ("translating the docs into German", "Volunteer translator is on it."),
            ("buying a new laptop", "Budget frozen until April."),
        ],
        [
            ("Should I look at the northern lights tonight?", 0),
            ("Let me check whether the polar lights will be visible", 0),
            ("What's new on HN about Tokio and async in Rust?", 1),
            ("The checkout tests failed again, let me investigate why", 2),
            ("I'll debug that intermittently failing billing test", 2),
            ("오늘 미팅 노트를 정리해 줘", 3),
            ("Will it rain tomorrow?", 4),
            ("Let me clean up the sign-in screen code", 5),
            ("Time to move our database to Postgres 17", 6),
            ("How are ACME shares trading today?", 7),
            ("Write to the apartment owner that the radiator is broken", 8),
            ("내일 아침에 달리기 하러 갈까?", 9),
            ("Localize the documentation for German speakers", 10),
            ("Which notebook computer should I purchase?", 11),
        ],
        [
            "Write a poem about the sea",
            "Deploy the new version of the API to production",
            "What is the capital of France?",
            "Summarize the quarterly revenue report",
            "Help me cook a vegetarian lasagna",
            "고양이 사료를 주문해 줘",
            "Update the README with install instructions",
            "Book a flight to Tokyo next week",
            "Review the pull request for the database migration",
            "Fix the typo in the footer",
            "Schedule a dentist appointment",
            "Explain how photosynthesis works",
            "Add unit tests for the parser",
            "What time is it in London?",
            "Rename the variable to something clearer",
            "오늘 저녁 메뉴 추천해 줘",
            "Draft a thank-you note to the team",
            "Set up CI for the frontend repository",
            "How many moons does Jupiter have?",
            "Clean the kitchen before guests arrive",
        ],
    ),
    "B": (
        [
            ("the Kubernetes cluster autoscaler tuning", "Ops owns it this quarter; do not touch."),
            ("reading the new Python release notes", "Already summarized them last week."),
            ("calling the bank about the mortgage rate", "They said to call back after the 15th."),
            ("Twitter threads about the election", "Too distracting during the sprint."),
            ("optimizing image loading on the homepage", "Measured it: already under 100 ms."),
            ("주식 시세 확인", "장 마감 후에만 본다"),
            ("the broken coffee machine", "Facilities will replace it on Monday."),
            ("planning the team offsite", "HR is organising it this year."),
            ("the memory leak in the PDF exporter", "Fixed upstream in the next release; wait for it."),
            ("learning Japanese vocabulary", "Paused until the exam season is over."),
        ],
        [
            ("Should I adjust how the k8s nodes scale up?", 0),
            ("What changed in CPython 3.14?", 1),
            ("Ring the lender to ask about my home loan interest", 2),
            ("Let me scroll through the social media posts on the vote", 3),
            ("Make the landing page pictures appear faster", 4),
            ("삼성전자 주가 지금 얼마야?", 5),
            ("The espresso maker in the office is dead again", 6),
            ("Let's organise the company retreat", 7),
            ("The document export keeps eating RAM, let me profile it", 8),
            ("Time for my daily kanji flashcards", 9),
            ("Can you tweak the pod autoscaling thresholds?", 0),
            ("I want to phone the bank regarding refinancing", 2),
            ("Let me investigate why the PDF generation process grows without bound", 8),
            ("Practice some Japanese words with me", 9),
            ("Find a venue for our team's away day", 7),
        ],
        [
            "Write a limerick about cats",
            "Compile the release changelog",
            "What's the boiling point of water?",
            "Translate this email to Spanish",
            "Refactor the authentication middleware",
            "Order more printer paper",
            "Explain the difference between TCP and UDP",
            "오늘 날씨 어때?",
            "Plan a birthday party for my son",
            "Add dark mode to the settings page",
            "How do I center a div?",
            "Archive last year's invoices",
            "Reply to the customer complaint about shipping",
            "Benchmark the search endpoint",
            "일본 여행 일정 짜줘",
            "Water the plants",
            "Merge the feature branch into main",
            "Who won the football match yesterday?",
            "Draft the quarterly OKRs",
            "Upgrade Node to the latest LTS",
        ],
    ),
}
RELATIVE = (0.035, 0.04, CALIBRATED_THRESHOLD, 0.05, 0.055)
RAW = (0.83, 0.84, 0.845, 0.85, 0.855)


def scores(variant: str) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per set: (relative, raw) score matrices [message, entry] and each message's entry (-1: none)."""
    embedder = LocalE5Embedder(variant)
    out: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    with tempfile.TemporaryDirectory() as folder:
        app = build_app(Settings(DATABASE_URL=f"sqlite:///{Path(folder) / 'bench.db'}"), embedder=embedder)
        try:
            for name, (entries, paraphrases, unrelated) in SETS.items():
                ctx = CallContext(agent_id=f"bench-{name}")
                expires = (datetime.now(UTC) + timedelta(days=30)).isoformat()
                skips = app.service.protocol.skips
                for item, reason in entries:
                    skips.add(SkipAddInput(item=item, reason=reason, expires=expires), ctx)
                stored = list(reversed(skips.store.skip_entries(skips.face.read_scope(ctx), datetime.now(UTC))))  # in entry order
                messages = [m for m, _ in paraphrases] + unrelated
                relative = np.array([skips.relative(m, stored) for m in messages])
                passages = embedder.embed_passages([meaning_text(item, reason) for item, reason in entries])
                raw = np.array([passages @ embedder.embed_query(m) for m in messages])
                target = np.array([i for _, i in paraphrases] + [-1] * len(unrelated))
                out[name] = (relative, raw, target)
        finally:
            app.close()
    return out


def report(label: str, matrix: np.ndarray, target: np.ndarray, thresholds: tuple[float, ...]) -> None:
    rows = np.arange(len(target))
    should = np.zeros_like(matrix, dtype=bool)
    should[rows[target >= 0], target[target >= 0]] = True
    for threshold in thresholds:
        found = float(np.mean(matrix[should] >= threshold))
        false = int(np.sum(matrix[~should] >= threshold))
        print(f"| {label} | {threshold:g} | {found:.0%} of {int(should.sum())} | {false} of {int((~should).sum())} |")


def main() -> None:
    variant = sys.argv[sys.argv.index("--variant") + 1] if "--variant" in sys.argv else "original"
    print(f"model: {LocalE5Embedder(variant).name}")
    print("| Set, score | Threshold | Paraphrases found | False matches |")
    print("|---|---|---|---|")
    for name, (relative, raw, target) in scores(variant).items():
        report(f"{name}, relative", relative, target, RELATIVE)
        report(f"{name}, raw cosine", raw, target, RAW)


if __name__ == "__main__":
    main()
