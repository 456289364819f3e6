"""The core commands: serve over MCP, and remember / recall / reindex / stats / consolidate /
migrate for humans."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Callable
from typing import Any, TextIO

from ..app import App, build_app, log_startup, start_scheduler, start_warm_up
from ..models import CallContext, ConsolidateInput, MemoryStatsInput, RecallInput, RememberInput
from ..ops import heap
from ..results import RecallResult, Result
from ..settings import Settings

COMMANDS = ("serve", "remember", "recall", "reindex", "stats", "consolidate", "migrate")


def register(sub: Any) -> None:
    """Add the core commands to the `memento` parser's subparsers."""

    serve = sub.add_parser("serve", help="run the MCP server")
    serve.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    serve.add_argument("--host", default=None, help="bind address for http (default: MEMENTO_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port for http (default: PORT or 56332)")
    serve.add_argument(
        "--insecure-no-auth", action="store_true", help="allow http on a non-loopback address with no credential configured (unsafe)"
    )

    rem = sub.add_parser("remember", help="store a memory")
    rem.add_argument("content")
    rem.add_argument("--topic", default="general")
    rem.add_argument("--type", default="fact", help="fact, decision, error, preference, procedure, relation, episode")
    rem.add_argument("--keyword", "-k", action="append", dest="keywords", help="repeatable")
    rem.add_argument("--importance", type=float)
    rem.add_argument("--anchor", action="store_true")
    rem.add_argument("--agent", dest="agent_id")
    rem.add_argument("--json", action="store_true", help="print the raw result")

    rec = sub.add_parser("recall", help="search memories")
    rec.add_argument("text", nargs="?", help="natural-language query")
    rec.add_argument("--keyword", "-k", action="append", dest="keywords")
    rec.add_argument("--topic")
    rec.add_argument("--type")
    rec.add_argument("--limit", type=int, default=10)
    rec.add_argument("--budget", type=int, default=1000, help="token budget")
    rec.add_argument("--agent", dest="agent_id")
    rec.add_argument("--json", action="store_true")

    rei = sub.add_parser("reindex", help="rebuild derived data: the full-text index, embeddings with the current model, vector indexes")
    rei.add_argument("--text", action="store_true", help="only the full-text index (fast: nothing is embedded)")
    stats = sub.add_parser("stats", help="store statistics")
    stats.add_argument("--agent", dest="agent_id")
    cons = sub.add_parser("consolidate", help="run the consolidation pipeline (or list recent runs)")
    cons.add_argument("--agent", dest="agent_id")
    cons.add_argument("--runs", action="store_true", help="list the recent runs (scheduled and manual) instead of running one")
    cons.add_argument("--limit", type=int, default=20, help="runs listed with --runs (default 20)")
    cons.add_argument("--json", action="store_true", help="with --runs: print the raw result")
    cons.add_argument("--stages", help="only these stages, comma-separated (e.g. merged,hotToWarm; default: all)")
    cons.add_argument(
        "--dry-run", action="store_true", help="report what a run would do (counts and ids), change nothing; holds the SQLite write lock"
    )
    mig = sub.add_parser("migrate", help="copy a whole store (every agent) to another backend; resumable")
    mig.add_argument("--from", dest="source", required=True, help="sqlite:///path or postgresql://user@host/db")
    mig.add_argument("--to", dest="target", required=True, help="sqlite:///path or postgresql://owner@host/db (the schema owner)")
    mig.add_argument("--batch-size", type=int, default=500, help="rows per transaction (default 500)")


def _consolidate_payload(args: argparse.Namespace) -> dict[str, object]:
    """ConsolidateInput's fields from `memento consolidate`'s options."""
    payload: dict[str, object] = {"agentId": args.agent_id} if args.agent_id else {}
    if args.stages is not None:
        payload["stages"] = [s.strip() for s in args.stages.split(",") if s.strip()]
    if args.dry_run:
        payload["dryRun"] = True
    return payload


def _print_recall(result: RecallResult) -> None:
    fragments = result.fragments
    if not fragments:
        print("No memories found.")
        return
    for i, f in enumerate(fragments, start=1):
        tag = "linked" if f.linked else f"score {f.score or 0:.3f}"
        print(f"{i:>2}. [{f.type.value}/{f.topic}] {f.id}  ({tag})")
        print(textwrap.indent(textwrap.fill(f.content, 90), "    "))
        if f.recall_reason:
            print(f"    why: {f.recall_reason}")
    print(f"-- {result.count} result(s), {result.total_tokens}/{result.token_budget} tokens, mode {result.search_mode}")


def _print_json(result: Result) -> None:
    """A result's wire form (the same JSON every face returns)."""
    print(json.dumps(result.dump(), ensure_ascii=False, indent=2))


def stage_progress(stream: TextIO | None = None) -> Callable[[int, int, str], None] | None:
    """`progress(done, total, stage)` for a consolidation, drawn on one line of stderr when it is
    a terminal; None (quiet) otherwise."""
    out = stream if stream is not None else sys.stderr
    if not out.isatty():
        return None

    def show(done: int, total: int, stage: str) -> None:
        end = "\n" if done >= total else ""
        out.write(f"\r\x1b[2K  consolidating [{done}/{total}] {stage}{end}")
        out.flush()

    return show


def _print_runs(app: App, args: argparse.Namespace, ctx: CallContext) -> None:
    listed = app.service.consolidation_runs(max(1, min(args.limit, 1000)), ctx, args.agent_id)
    if args.json:
        _print_json(listed)
        return
    if not listed.runs:
        print("No consolidation runs recorded.")
        return
    for run in listed.runs:
        scope = "every namespace" if run.whole_store else run.agent_id
        took = ""
        if run.stages and "elapsedMs" in run.stages:
            took = f" {run.stages['elapsedMs']:.0f} ms"
        print(f"{run.started_at}  {run.trigger:<8} {run.outcome:<8} {scope}{took}  {run.replica or ''}".rstrip())
        if run.error:
            print(f"    {run.error}")


TEXT_BATCH = 500  # fragments re-analysed per transaction by `memento reindex`


def _reindex_text(app: App) -> None:
    """Write every fragment's full-text entries again with the current analyser (an index written
    by an older or faulty one is repaired), a transaction per batch, with progress."""
    print("Re-analysing the full text of every fragment ...", file=sys.stderr)
    done, after = 0, 0
    while True:
        count, after = app.store.reanalyse_text(after, TEXT_BATCH)
        if not count:
            break
        done += count
        print(f"\r  {done}", end="", file=sys.stderr, flush=True)
    print(f"\nDone: {done} re-analysed.", file=sys.stderr)


def _reindex(app: App) -> None:
    from ..models import AgentScope

    store = app.store
    if app.embedder is None:
        print("No embedding provider configured (EMBEDDING_PROVIDER=none): nothing to embed.")
        return
    total = store.count(AgentScope("system"), _all_filter())
    print(f"Re-embedding {total} fragment(s) with {app.embedder.name} ...", file=sys.stderr)
    store.clear_embeddings()
    done, after = 0, 0
    while True:
        batch = store.missing_embeddings(AgentScope("system"), 128, after)
        if not batch:
            break
        after = batch[-1][0]
        vectors = app.embedder.embed_passages([c for _, _, c in batch])
        for (_, fid, _), vec in zip(batch, vectors):
            store.set_embedding(fid, vec)
        done += len(batch)
        print(f"\r  {done}/{total}", end="", file=sys.stderr, flush=True)
    print(f"\nDone: {done} embedded.", file=sys.stderr)
    entities = _reindex_entities(app)
    if entities:
        print(f"Re-embedded {entities} entit{'y' if entities == 1 else 'ies'} (name and description).", file=sys.stderr)


def _reindex_entities(app: App) -> int:
    """Seed 001's entities get the current model's embedding of `name + " " + description`."""
    from datetime import UTC, datetime

    from ..graph import EntityChanges
    from ..models import AgentScope

    assert app.embedder is not None
    scope, done, offset = AgentScope("system"), 0, 0
    while True:
        page, total = app.store.list_entities(scope, entity_type=None, name_contains=None, limit=100, offset=offset)
        if not page:
            return done
        texts = [f"{e.name} {e.description}" if e.description else e.name for e in page]
        for entity, vec in zip(page, app.embedder.embed_passages(texts)):
            app.store.update_entity(scope, entity.id, EntityChanges(embedding=vec), datetime.now(UTC))
        done += len(page)
        offset += len(page)
        if offset >= total:
            return done


def _all_filter() -> Any:
    from ..storage.protocol import SearchFilter

    return SearchFilter()


def _migrate(args: argparse.Namespace) -> int:
    from ..migrate import TextProgress, migrate

    report = migrate(args.source, args.target, batch_size=args.batch_size, progress=TextProgress(sys.stderr))
    print(json.dumps(report.as_dict(), indent=2))
    return 0


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.command == "migrate":
        return _migrate(args)
    if args.command == "serve":
        from ..mcp.toolsets import selected_tools

        selected_tools(settings.toolsets)  # an unknown toolset stops here, before anything is opened
        app = build_app(settings)
        start_warm_up(app, then=heap.settle)  # the model loads while the handshake runs (stdio: one server per agent session)
        log_startup(app, args.transport)
        start_scheduler(app)  # consolidation by interval, inserts and start-up; app.close() stops it
        if settings.evaluator_enabled and app.evaluator is not None:
            app.evaluator.start()  # the evaluator's worker thread (000 §7); App.close stops it
        if args.transport == "stdio":  # the web stack (FastAPI, uvicorn) is not imported: stdio starts faster
            import anyio

            from ..mcp.stdio import serve_stdio

            anyio.run(serve_stdio, app)
        else:
            from ..web import serve_http

            serve_http(
                app,
                args.host or settings.host,
                args.port if args.port is not None else settings.port,
                allow_unauthenticated=args.insecure_no_auth,
            )
        return 0
    app = build_app(settings)
    try:
        ctx = CallContext()
        if args.command == "remember":
            payload: dict[str, Any] = {"content": args.content, "topic": args.topic, "type": args.type, "isAnchor": args.anchor}
            for key, value in (("keywords", args.keywords), ("importance", args.importance), ("agentId", args.agent_id)):
                if value is not None:
                    payload[key] = value
            stored = app.service.remember(RememberInput.model_validate(payload), ctx)
            if args.json:
                _print_json(stored)
            else:
                state = "stored" if stored.created else "already known"
                print(f"{state}: {stored.id} [{stored.fragment.type.value}/{stored.fragment.topic}] tier {stored.fragment.ttl_tier.value}")
                if stored.message:
                    print(stored.message)
        elif args.command == "recall":
            payload = {"limit": args.limit, "tokenBudget": args.budget}
            for key, value in (
                ("text", args.text),
                ("keywords", args.keywords),
                ("topic", args.topic),
                ("type", args.type),
                ("agentId", args.agent_id),
            ):
                if value is not None:
                    payload[key] = value
            found = app.service.recall(RecallInput.model_validate(payload), ctx)
            _print_json(found) if args.json else _print_recall(found)
        elif args.command == "reindex":
            _reindex_text(app)
            if not args.text:
                _reindex(app)
        elif args.command == "stats":
            payload = {"agentId": args.agent_id} if args.agent_id else {}
            _print_json(app.service.memory_stats(MemoryStatsInput.model_validate(payload), ctx))
        elif args.command == "consolidate" and args.runs:
            _print_runs(app, args, ctx)
        elif args.command == "consolidate":
            payload = _consolidate_payload(args)
            _print_json(app.service.memory_consolidate(ConsolidateInput.model_validate(payload), ctx, stage_progress()))
    finally:
        app.close()
    return 0
