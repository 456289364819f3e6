"""Imports flow one way: faces → service → engines → storage/embeddings → models/errors."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "memento"

LAYERS = {
    "memento": 0, "memento.errors": 0, "memento.models": 0, "memento.results": 0, "memento.settings": 0, "memento.analysis": 0,
    "memento.storage": 1, "memento.embeddings": 1,
    "memento.factory": 2, "memento.retrieval": 2, "memento.lifecycle": 2, "memento.access": 2,
    "memento.service": 3, "memento.app": 3, "memento.auth": 3, "memento.ops": 3, "memento.migrate": 3,
    "memento.mcp": 4, "memento.cli": 4, "memento.__main__": 4,
}
# Siblings on one layer that must not know each other.
FORBIDDEN = {("memento.storage", "memento.embeddings"), ("memento.embeddings", "memento.storage")}


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_key(module: str) -> str:
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        key = ".".join(parts[:n])
        if key in LAYERS:
            return key
    raise AssertionError(f"{module} has no layer; add it to LAYERS")


def imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("memento")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("memento"):
                found.append(target)
    return found


def test_every_import_points_to_the_same_or_a_lower_layer() -> None:
    problems = []
    for path in SRC.rglob("*.py"):
        source = layer_key(module_name(path))
        for target in imports(path):
            dest = layer_key(target)
            if LAYERS[dest] > LAYERS[source] or (source, dest) in FORBIDDEN:
                problems.append(f"{module_name(path)} imports {target}")
    assert problems == []
