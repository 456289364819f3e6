"""Imports flow one way: web/cli → MCP → service, auth, ops → engines → storage/embeddings →
models/errors. Inside MCP the transports sit above the protocol core. Operations and auth take
typed protocols (memento.endpoint), never untyped handles into MCP objects or security hooks
looked up by name."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "memento"

LAYERS = {
    "memento": 0,
    "memento.errors": 0,
    "memento.models": 0,
    "memento.results": 0,
    "memento.settings": 0,
    "memento.analysis": 0,
    "memento.fields": 0,
    "memento.observe": 0,
    "memento.extras": 0,
    "memento.redaction": 0,
    "memento.graph": 0,
    "memento.graph_inputs": 0,
    "memento.graph_results": 0,
    "memento.vault_models": 0,
    "memento.vault_query": 0,
    "memento.storage": 1,
    "memento.embeddings": 1,
    "memento.llm": 1,
    "memento.factory": 2,
    "memento.vectorizer": 2,
    "memento.outbox": 2,
    "memento.views": 2,
    "memento.retrieval": 2,
    "memento.lifecycle": 2,
    "memento.access": 2,
    "memento.service": 3,
    "memento.erasure": 3,
    "memento.summarize": 3,
    "memento.session_handles": 3,
    "memento.entity_service": 3,
    "memento.vault_service": 3,
    "memento.protocol_face": 3,
    "memento.app": 3,
    "memento.auth": 3,
    "memento.ops": 3,
    "memento.migrate": 3,
    "memento.exchange": 3,
    "memento.endpoint": 3,
    "memento.mcp": 4,
    "memento.rest": 4,
    "memento.ui": 4,
    "memento.importers": 4,
    "memento.web": 5,
    "memento.cli": 5,
    "memento.__main__": 5,
}
TOP = {"memento.web", "memento.cli", "memento.__main__"}
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


def test_every_module_has_a_declared_layer() -> None:
    """A new top-level module or package must be placed in LAYERS, not fall back to layer 0."""
    undeclared = {
        f"memento.{path.stem if path.is_file() else path.name}"
        for path in SRC.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path.is_dir() and (path / "__init__.py").exists())
    } - set(LAYERS)
    assert undeclared == set(), f"add these to LAYERS: {sorted(undeclared)}"


def test_every_import_points_to_the_same_or_a_lower_layer() -> None:
    problems = []
    for path in SRC.rglob("*.py"):
        source = layer_key(module_name(path))
        for target in imports(path):
            dest = layer_key(target)
            if LAYERS[dest] > LAYERS[source] or (source, dest) in FORBIDDEN:
                problems.append(f"{module_name(path)} imports {target}")
    assert problems == []


def _is_transport(module: str) -> bool:
    """MCP transports: Streamable HTTP (http*), the SSE streams and legacy SSE (sse_*), stdio."""
    name = module.removeprefix("memento.mcp.")
    return module.startswith("memento.mcp.") and (name.startswith(("http", "sse_")) or name == "stdio")


def test_the_mcp_core_never_imports_a_transport() -> None:
    problems = []
    for path in (SRC / "mcp").glob("*.py"):
        source = module_name(path)
        if _is_transport(source):
            continue
        problems += [f"{source} imports {t}" for t in imports(path) if _is_transport(t)]
    assert problems == []


def test_only_web_and_cli_are_on_top() -> None:
    assert {key for key, layer in LAYERS.items() if layer == max(LAYERS.values())} == TOP
    importers = {module_name(p) for p in SRC.rglob("*.py") for t in imports(p) if layer_key(t) in TOP}
    assert {layer_key(m) for m in importers} <= TOP


HANDLES = {"mcp", "endpoint", "gate", "hub", "server", "transport", "settings", "app"}


def test_ops_and_auth_take_typed_handles_and_look_no_hook_up_by_name() -> None:
    problems = []
    for package in ("ops", "auth"):
        for path in (SRC / package).rglob("*.py"):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    for arg in [*node.args.args, *node.args.kwonlyargs]:
                        if arg.arg in HANDLES and (arg.annotation is None or ast.unparse(arg.annotation) == "Any"):
                            problems.append(f"{module_name(path)}.{node.name}({arg.arg}: Any)")
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" and node.args:
                    target = ast.unparse(node.args[0])
                    if any(word in target for word in ("mcp", "gate", "guard", "settings", "server")):
                        problems.append(f"{module_name(path)}: getattr({target}, ...)")
    assert problems == []
