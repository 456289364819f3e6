"""`memento evaluator`: the operator's view of the evaluator's queue (docs/lifecycle.md).

    memento evaluator                 # counts: jobs by status, open merge proposals, tokens today
    memento evaluator --dead          # the dead letters, with their last error
    memento evaluator --requeue [ID]  # dead jobs back to the queue (every one without ids)
    memento evaluator --proposals     # open merge proposals
    memento evaluator --apply ID      # merge a proposal with 001's merge (the proposal goes with the absorbed memory)
    memento evaluator --dismiss ID    # keep both memories
    memento evaluator --run           # queue the memories never evaluated, then work the queue once

Without `--agent` it sees every namespace; with it, that agent's rows only.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..app import App, build_app
from ..errors import NotFound
from ..models import MAINTENANCE_AGENTS, AgentScope, CallContext
from ..settings import Settings

COMMANDS = ("evaluator",)
LIMIT = 100


def register(sub: Any) -> None:
    """Add `memento evaluator` to the `memento` parser's subparsers."""
    ev = sub.add_parser("evaluator", help="the evaluator's queue: counts, dead letters, merge proposals")
    what = ev.add_mutually_exclusive_group()
    what.add_argument("--dead", action="store_true", help="list the dead jobs")
    what.add_argument("--requeue", nargs="*", type=int, metavar="ID", help="dead jobs back to the queue (all without ids)")
    what.add_argument("--proposals", action="store_true", help="list the open merge proposals")
    what.add_argument("--apply", type=int, metavar="ID", help="merge a proposal's memory into the other (001's merge)")
    what.add_argument("--dismiss", type=int, metavar="ID", help="dismiss a merge proposal")
    what.add_argument("--run", action="store_true", help="queue never-evaluated memories and work the queue until nothing is due")
    ev.add_argument("--agent", help="only this agent's rows; default: every agent")
    ev.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace, settings: Settings) -> int:
    app = build_app(settings)
    try:
        out = _act(app, args, AgentScope(args.agent) if args.agent else AgentScope("system"))
    finally:
        app.close()
    print(json.dumps(out, indent=2, default=str) if args.json or not isinstance(out, dict) else _text(out))
    return 0


def _act(app: App, args: argparse.Namespace, scope: AgentScope) -> Any:
    store, now = app.store, app.service.clock()
    if args.dead:
        return [job.__dict__ for job in store.evaluation_jobs(scope, "dead", LIMIT)]
    if args.requeue is not None:
        return {"requeued": store.requeue_evaluations(scope, args.requeue, now)}
    if args.proposals:
        return [p.__dict__ for p in store.merge_proposals(scope, "open", LIMIT)]
    if args.apply is not None:
        proposal = _proposal(app, scope, args.apply)
        ctx = CallContext(agent_id=None if scope.agent_id in MAINTENANCE_AGENTS else scope.agent_id)
        merged = app.service.entities.absorb_memory(proposal.agent_id, proposal.from_id, proposal.to_id, ctx)
        return {"applied": proposal.id, "absorbed": proposal.from_id, "into": merged.id}
    if args.dismiss is not None:
        return {"dismissed": store.set_proposal_status(scope, args.dismiss, "dismissed").id}
    if args.run:
        assert app.evaluator is not None
        queued = app.evaluator.backfill(scope)
        return {"backfilled": queued, **app.evaluator.drain().__dict__}
    return store.evaluation_counts(scope, now.date()).__dict__


def _proposal(app: App, scope: AgentScope, proposal_id: int) -> Any:
    for proposal in app.store.merge_proposals(scope, "open", 10_000):
        if proposal.id == proposal_id:
            return proposal
    raise NotFound(f"open merge proposal {proposal_id} not found")


def _text(out: dict[str, Any]) -> str:
    return "\n".join(f"{key}: {value}" for key, value in out.items())
