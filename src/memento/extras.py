"""Optional dependencies: a missing one is a clear message naming the extra to install, not a
ModuleNotFoundError from deep inside a backend."""

from __future__ import annotations

import importlib
import importlib.metadata

from .errors import MementoError

EXTRA_MODULES: dict[str, tuple[str, ...]] = {"postgres": ("psycopg", "psycopg_pool", "pgvector"), "redis": ("redis",)}


class MissingDependency(MementoError):
    """An optional dependency the configuration needs is not installed."""

    code = "missing_dependency"


def distribution() -> str:
    """The name this package is installed under (what `pip install` needs)."""
    names = importlib.metadata.packages_distributions().get("memento") or ["memento"]
    return names[0]


def require(extra: str, needed_for: str) -> None:
    """Raise MissingDependency naming `extra` when any of its modules cannot be imported."""
    for module in EXTRA_MODULES[extra]:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise MissingDependency(
                f"{needed_for} needs the optional '{extra}' dependencies, which are not installed"
                f" (no module {module!r}): pip install '{distribution()}[{extra}]'"
            ) from exc
