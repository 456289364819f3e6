"""Crash loop: SIGKILL a writer again and again, then prove nothing acknowledged was lost.

A child process builds the real app once (the hash embedder, so a cycle is cheap) and loops
mixed writes through the real service: remember (some linked, some session working memory),
amend in place, amend with supersedes, link, forget and reflect. After each call returns it
prints one JSON line, the acknowledgement. The parent reads the acknowledgements as they
arrive, kills the child at a random moment (so kills land mid-write), and after each kill
checks the database against what was acknowledged:

* lost: an acknowledged fragment, content, link or forget that the database does not show;
* half-done: a successor (source `supersedes:<id>`) without its `superseded_by` edge or with
  the original's importance not lowered, or a reflect with some but not all of its fragments
  (acknowledged or not: an unacknowledged write may be absent, never half there);
* integrity: SQLite `PRAGMA integrity_check`, the FTS5 integrity check and one index row per
  fragment; on PostgreSQL the full-text and keyword lookup tables agree with the fragments.

    python bench/crashloop.py --backend sqlite --kills 1000
    python bench/crashloop.py --backend postgres --kills 1000

Exits 1 when anything was lost, half-done or inconsistent.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FACT_IMPORTANCE = 0.5  # a fact's default importance; a superseded original gets half of it
REFLECT_PARTS = 3  # summary, one decision, one resolved error
WRITER_DIMENSIONS = 64


# ------------------------------------------------------------------ the child: a writer


def _child(database_url: str, known_path: str, seed: int) -> None:
    """Write forever through the real service, acknowledging each completed call on stdout."""
    from memento.app import build_app
    from memento.embeddings.hashing import HashEmbedder
    from memento.errors import NotFound
    from memento.models import CallContext, RecallInput
    from memento.settings import Settings

    app = build_app(Settings(DATABASE_URL=database_url, EMBEDDING_PROVIDER="hash"), embedder=HashEmbedder(WRITER_DIMENSIONS))
    service, ctx = app.service, CallContext(session_id=f"crash-{seed}")
    rng = random.Random(seed)
    live: list[str] = json.loads(Path(known_path).read_text())
    n = 0

    def ack(**record: Any) -> None:
        sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()

    # Recovery work (the vector index is rebuilt after a kill) happens before `ready`, so the
    # kill window that follows is spent writing.
    service.recall(RecallInput(text="warm up after the crash"), ctx)
    ack(op="ready")
    while True:
        try:
            n = _write_one(service, ctx, rng, live, seed, n + 1, ack)
        except NotFound as exc:  # an id whose unacknowledged forget happened before the last kill
            live[:] = [i for i in live if i not in str(exc)]


def _write_one(service: Any, ctx: Any, rng: random.Random, live: list[str], seed: int, n: int, ack: Any) -> int:
    """One random write (the n-th of this writer), acknowledged once it has returned."""
    from memento.models import AmendInput, ForgetInput, LinkInput, ReflectInput, RememberInput, TaskEffectiveness

    word = f"s{seed}n{n}"
    roll = rng.random()
    if roll < 0.35 or len(live) < 4:
        linked = [rng.choice(live)] if live and rng.random() < 0.3 else None
        session = rng.random() < 0.1
        inp = RememberInput(
            content=f"crash loop note {word} about topic {rng.randrange(50)}",
            topic="crash",
            type="fact",
            linkedTo=linked,
            scope="session" if session else "permanent",
        )
        stored = service.remember(inp, ctx)
        if not session:
            live.append(stored.id)
        ack(op="remember", id=stored.id, content=stored.fragment.content, session=session)
    elif roll < 0.5:
        target = rng.choice(live)
        ack(op="intent", id=target, content=f"amended note {word}")
        amended = service.amend(AmendInput(id=target, content=f"amended note {word}"), ctx)
        ack(op="amend", id=target, content=amended.fragment.content)
    elif roll < 0.65:
        old = rng.choice(live)
        successor = service.amend(AmendInput(id=old, content=f"superseding note {word}", supersedes=True), ctx)
        live.append(successor.id)
        ack(op="supersede", old=old, id=successor.id, content=successor.fragment.content)
    elif roll < 0.75:
        a, b = rng.sample(live, 2)
        service.link(LinkInput(fromId=a, toId=b, relationType="related"), ctx)
        ack(op="link", id=a, to=b)
    elif roll < 0.88:
        target = live.pop(rng.randrange(len(live)))
        ack(op="intent", id=target, content=None)
        service.forget(ForgetInput(id=target, force=True), ctx)
        ack(op="forget", id=target)
    else:
        marker = f"reflect-{word}"
        reflected = service.reflect(
            ReflectInput(
                summary=f"{marker} summary",
                decisions=[f"{marker} decision"],
                errors_resolved=[f"{marker} error"],
                task_effectiveness=TaskEffectiveness(overall_success=True),
            ),
            ctx,
        )
        ack(op="reflect", marker=marker, ids=[f.id for f in reflected.fragments])
    return n


# ------------------------------------------------------------------ the parent: model and checks


@dataclass
class Model:
    """What the acknowledgements say the database must show."""

    content: dict[str, str] = field(default_factory=dict)  # live permanent fragments
    forgotten: set[str] = field(default_factory=set)
    links: set[tuple[str, str]] = field(default_factory=set)
    supersedes: set[tuple[str, str]] = field(default_factory=set)
    reflects: dict[str, list[str]] = field(default_factory=dict)
    acks: Counter[str] = field(default_factory=Counter)
    # Writes announced but not acknowledged (the kill came first): id -> the content it would
    # have (None: a forget). The database may show either state; verify() settles which.
    inflight: dict[str, str | None] = field(default_factory=dict)

    def apply(self, r: dict[str, Any]) -> None:
        op = r["op"]
        if op == "ready":
            return
        if op == "intent":
            self.inflight[r["id"]] = r["content"]
            return
        self.inflight.pop(r.get("id", ""), None)
        self.acks[op] += 1
        if op == "remember" and not r["session"] or op == "amend":
            self.content[r["id"]] = r["content"]
        elif op == "supersede":
            self.content[r["id"]] = r["content"]
            self.supersedes.add((r["old"], r["id"]))
        elif op == "link":
            self.links.add((r["id"], r["to"]))
        elif op == "forget":
            self.content.pop(r["id"], None)
            self.forgotten.add(r["id"])
        elif op == "reflect":
            self.reflects[r["marker"]] = r["ids"]


@dataclass
class Verdict:
    lost: list[str] = field(default_factory=list)
    half_done: list[str] = field(default_factory=list)
    integrity: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.half_done or self.integrity)


def _rows(database_url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if database_url.startswith("sqlite:///"):
        import pysqlite3.dbapi2 as sqlite3

        conn = sqlite3.connect(database_url.removeprefix("sqlite:///"))
        try:
            return [tuple(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SELECT set_config('app.current_agent_id', 'system', false)")  # every namespace
        return [tuple(r) for r in conn.execute(sql.replace("?", "%s"), params).fetchall()]


def verify(model: Model, database_url: str) -> Verdict:
    """Compare the database (read as its owner, past every namespace) with the model."""
    pg = not database_url.startswith("sqlite:///")
    table = "agent_memory.fragments" if pg else "fragments"
    links_table = "agent_memory.fragment_links" if pg else "fragment_links"
    # a forget is soft by default (004 §5.1): the row stays, hidden; what counts is what reads see
    fragments = {r[0]: r for r in _rows(database_url, f"SELECT id, content, source, importance FROM {table} WHERE deleted_at IS NULL")}
    links = {(a, b, t) for a, b, t in _rows(database_url, f"SELECT from_id, to_id, relation_type FROM {links_table}")}
    v = Verdict()
    for fid, after in list(model.inflight.items()):  # an unacknowledged write either happened or not
        if fid in model.content and (fid not in fragments if after is None else fragments.get(fid, ("",) * 2)[1] == after):
            model.apply({"op": "forget", "id": fid} if after is None else {"op": "amend", "id": fid, "content": after})
            model.acks["forget" if after is None else "amend"] -= 1  # settled, not acknowledged
    model.inflight.clear()
    for fid, content in model.content.items():
        if fid not in fragments:
            v.lost.append(f"fragment {fid}")
        elif fragments[fid][1] != content:
            v.lost.append(f"content of {fid}")
    v.lost += [f"forget of {fid}" for fid in model.forgotten if fid in fragments]
    v.lost += [f"link {a}->{b}" for a, b in model.links if a in fragments and b in fragments and (a, b, "related") not in links]
    for marker, ids in model.reflects.items():
        v.lost += [f"reflect {marker} fragment {i}" for i in ids if i not in fragments]
    # half-done, acknowledged or not
    for fid, (_, _content, source, _) in fragments.items():
        if source and source.startswith("supersedes:"):
            old = source.removeprefix("supersedes:")
            # the edge may since have been retyped by a `link` of the same pair (link retypes)
            edge = any((old, fid, kind) in links for kind in ("superseded_by", "related"))
            if old in fragments and (not edge or fragments[old][3] >= FACT_IMPORTANCE):
                v.half_done.append(f"supersede {old}->{fid}")
    reflected = Counter(c.split(" ")[0] for _, c, s, _ in fragments.values() if s == "reflect")
    v.half_done += [f"reflect {m}: {n} of {REFLECT_PARTS}" for m, n in reflected.items() if n != REFLECT_PARTS]
    stored = _rows(database_url, f"SELECT count(*) FROM {table}")[0][0]  # the hidden rows keep their index entries
    v.integrity += _integrity(database_url, int(stored))
    return v


def _integrity(database_url: str, fragments: int) -> list[str]:
    problems: list[str] = []
    if database_url.startswith("sqlite:///"):
        checks = {
            "integrity_check": ("PRAGMA integrity_check", [("ok",)]),
            "fts rows": ("SELECT count(*) FROM fragments_fts", [(fragments,)]),
            "orphan keyword rows": ("SELECT count(*) FROM fragment_keywords WHERE seq NOT IN (SELECT seq FROM fragments)", [(0,)]),
            "orphan vectors": ("SELECT count(*) FROM fragment_embeddings WHERE seq NOT IN (SELECT seq FROM fragments)", [(0,)]),
        }
        try:
            _rows(database_url, "INSERT INTO fragments_fts (fragments_fts, rank) VALUES ('integrity-check', 1)")
        except Exception as exc:  # noqa: BLE001 - reported, not raised
            problems.append(f"fts5 integrity-check: {exc}")
    else:
        checks = {
            "keyword rows": (
                "SELECT count(*) FROM agent_memory.fragments f WHERE (SELECT count(*) FROM agent_memory.fragment_keywords k"
                " WHERE k.seq = f.seq) <> (SELECT count(DISTINCT x) FROM unnest(f.keywords) x)",
                [(0,)],
            ),
            "term rows": (
                "SELECT count(*) FROM agent_memory.fragments f WHERE length(f.search) > 0 AND NOT EXISTS"
                " (SELECT 1 FROM agent_memory.fragment_terms t WHERE t.seq = f.seq)",
                [(0,)],
            ),
            "orphan term rows": (
                "SELECT count(*) FROM agent_memory.fragment_terms t WHERE NOT EXISTS"
                " (SELECT 1 FROM agent_memory.fragments f WHERE f.seq = t.seq)",
                [(0,)],
            ),
        }
    for name, (sql, expected) in checks.items():
        found = _rows(database_url, sql)
        if found != expected:
            problems.append(f"{name}: {found} (expected {expected})")
    return problems


# ------------------------------------------------------------------ the loop


def run(database_url: str, check_url: str, kills: int, seed: int, verify_every: int, folder: Path, progress: bool = True) -> dict[str, Any]:
    """Kill the writer `kills` times; returns the figures (see the module docstring)."""
    rng = random.Random(seed)
    model, verdict, checks = Model(), Verdict(), 0
    known = folder / "known.json"
    errors = (folder / "writer.log").open("ab")  # the writer's stderr, for a post-mortem
    started = time.monotonic()
    for cycle in range(1, kills + 1):
        known.write_text(json.dumps(sorted(model.content)))
        child = subprocess.Popen(
            [sys.executable, __file__, "--child", database_url, str(known), str(seed * 100_000 + cycle)],
            stdout=subprocess.PIPE,
            stderr=errors,
        )
        assert child.stdout is not None
        ready = child.stdout.readline()
        if not ready:
            tail = (folder / "writer.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the writer died before it was ready (exit {child.wait()}):\n{tail}")
        deadline = time.monotonic() + rng.uniform(0.02, 0.4)
        os.set_blocking(child.stdout.fileno(), False)
        pending = b""
        while time.monotonic() < deadline:  # drain acknowledgements while the writer works
            pending += child.stdout.read() or b""
            time.sleep(0.005)
        child.send_signal(signal.SIGKILL)
        child.wait()
        os.set_blocking(child.stdout.fileno(), True)
        pending += child.stdout.read()  # what the writer acknowledged before it died
        for line in pending.decode().splitlines():
            if line.endswith("}"):  # a line cut by the kill was never acknowledged
                model.apply(json.loads(line))
        if cycle % verify_every == 0 or cycle == kills:
            found = verify(model, check_url)
            checks += 1
            verdict.lost += found.lost
            verdict.half_done += found.half_done
            verdict.integrity += found.integrity
            if not found.ok:
                break
        if progress and cycle % 50 == 0:
            print(f"  {cycle}/{kills} kills, {sum(model.acks.values())} acknowledged writes", file=sys.stderr)
    return {
        "kills": cycle,
        "checks": checks,
        "acknowledged": dict(model.acks),
        "lost": verdict.lost,
        "half_done": verdict.half_done,
        "integrity": verdict.integrity,
        "elapsed_s": round(time.monotonic() - started, 1),
    }


@contextmanager
def database(backend: str, folder: Path) -> Iterator[tuple[str, str]]:
    """(the writer's URL, the checker's URL): a fresh SQLite file, or a private PostgreSQL,
    migrated by its owner, written by the application role, checked by the owner; stopped after."""
    if backend == "sqlite":
        url = f"sqlite:///{folder / 'crash.db'}"
        yield url, url
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from pg_server import embedded_postgres

    from memento.app import build_app
    from memento.settings import Settings

    with embedded_postgres() as server:
        from memento.embeddings.hashing import HashEmbedder

        settings = Settings(DATABASE_URL=server.app_dsn, DATABASE_MIGRATION_URL=server.owner_dsn, EMBEDDING_PROVIDER="hash")
        build_app(settings, embedder=HashEmbedder(WRITER_DIMENSIONS)).close()  # migrate once, as the owner
        yield server.app_dsn, server.owner_dsn


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--verify-every", type=int, default=1, help="check the database after every k kills")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memento-crash-") as tmp, database(args.backend, Path(tmp)) as (url, check):
        figures = run(url, check, args.kills, args.seed, args.verify_every, Path(tmp))
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"backend {args.backend}: {figures['kills']} kills, {figures['checks']} checks, {figures['elapsed_s']} s")
        print("acknowledged: " + ", ".join(f"{k} {v}" for k, v in sorted(figures["acknowledged"].items())))
        print(f"lost {len(figures['lost'])}, half-done {len(figures['half_done'])}, integrity failures {len(figures['integrity'])}")
        for problem in (figures["lost"] + figures["half_done"] + figures["integrity"])[:20]:
            print("  " + problem)
    ok = not (figures["lost"] or figures["half_done"] or figures["integrity"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
