"""The `memento` command line. Each command module adds its subcommands with `register(sub)`,
names them in `COMMANDS`, and runs them with `run(args, settings)`; `main` parses, loads the
settings, configures logging and dispatches."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

from pydantic import ValidationError

from .. import __version__
from ..errors import MementoError
from ..ops.logs import configure_logging
from ..settings import Settings
from . import admin, core, evaluate, hooks, transfer, ui

MODULES: tuple[ModuleType, ...] = (core, admin, transfer, hooks, evaluate, ui)


def _parser() -> tuple[argparse.ArgumentParser, dict[str, Callable[[argparse.Namespace, Settings], int]]]:
    p = argparse.ArgumentParser(prog="memento", description="Persistent memory server for LLM agents (MCP).")
    p.add_argument("--version", action="version", version=f"memento {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    runners: dict[str, Callable[[argparse.Namespace, Settings], int]] = {}
    for module in MODULES:
        module.register(sub)
        for name in module.COMMANDS:
            if name in runners:
                raise RuntimeError(f"command {name!r} is registered twice")
            runners[name] = module.run
    return p, runners


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `memento` console script."""
    parser, runners = _parser()
    args = parser.parse_args(argv)
    try:
        settings = Settings()
    except ValidationError as exc:
        print(f"memento: invalid configuration:\n{exc}", file=sys.stderr)
        return 0 if args.command in hooks.NEVER_BLOCK else 2  # exit 2 would block the agent host
    configure_logging(settings)
    try:
        return runners[args.command](args, settings)
    except ValidationError as exc:
        print("memento: invalid input: " + "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()), file=sys.stderr)
        return 2
    except MementoError as exc:
        print(f"memento: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
