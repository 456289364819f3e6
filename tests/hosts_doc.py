"""docs/hosts.md as data, for tests/test_hosts.py and tests/test_hosts_cli.py.

The page tags every block it wants checked with an HTML comment on the line before the fence:

    <!-- host: cursor http -->          a configuration file (json or toml) of one host
    <!-- host-cli: codex stdio -->      shell commands that add the server (`verify`: that check it)

`server_of` reads a host's configuration the way that host does (its key names, and its own
`${...}` expansion: each host documents a different syntax) and returns what it would start or
connect to. The page's placeholders are replaced first: `/path/to/memento` by the runtime
environment's `memento`, the port 56332 by the test server's, `YOUR-ACCESS-KEY` by its key.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "hosts.md"
HOSTS = ("claude-code", "claude-desktop", "cursor", "vscode", "codex", "gemini")
MEMENTO = "/path/to/memento"
PORT = 56332
KEY = "YOUR-ACCESS-KEY"

_TAG = re.compile(r"^<!-- (host|host-cli): ([a-z-]+) ([a-z-]+) -->$")
_FENCE = re.compile(r"^```([a-z]*)$")


@dataclass(frozen=True)
class Block:
    """One fenced block of the page; `tag` is `host` or `host-cli` (empty when untagged)."""

    tag: str
    host: str
    variant: str
    lang: str
    text: str
    line: int

    @property
    def name(self) -> str:
        return f"{self.host}-{self.variant}"


def blocks(page: Path = PAGE) -> list[Block]:
    """Every fenced block of the page, with the tag on the line before it (if any)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i] == "```")
        tag = _TAG.match(lines[index - 1]) if index > 0 else None
        kind, host, variant = tag.groups() if tag else ("", "", "")
        found.append(Block(kind, host, variant, opening.group(1), "\n".join(lines[index + 1 : end]), index + 1))
        index = end + 1
    return found


def config_block(host: str, variant: str) -> Block:
    (block,) = [b for b in blocks() if b.tag == "host" and (b.host, b.variant) == (host, variant)]
    return block


def cli_block(host: str, variant: str) -> Block:
    (block,) = [b for b in blocks() if b.tag == "host-cli" and (b.host, b.variant) == (host, variant)]
    return block


def parse(block: Block) -> dict[str, Any]:
    """The block's document (json or toml)."""
    parsed: dict[str, Any] = tomllib.loads(block.text) if block.lang == "toml" else json.loads(block.text)
    return parsed


@dataclass(frozen=True)
class Placeholders:
    """What the page's placeholders stand for in a test run."""

    memento: str
    port: int
    key: str

    def text(self, value: str) -> str:
        value = value.replace(f"127.0.0.1:{PORT}", f"127.0.0.1:{self.port}").replace(KEY, self.key)
        return self.memento if value == MEMENTO else value

    def command(self, text: str) -> str:
        """Shell commands with the placeholders replaced (the path quoted for the shell)."""
        return text.replace(MEMENTO, shlex.quote(self.memento)).replace(f"127.0.0.1:{PORT}", f"127.0.0.1:{self.port}")

    def apply(self, value: Any) -> Any:
        """`value` (a parsed document) with every placeholder replaced."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.apply(v) for v in value]
        if isinstance(value, dict):
            return {k: self.apply(v) for k, v in value.items()}
        return value


@dataclass(frozen=True)
class Stdio:
    command: str
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Http:
    url: str
    headers: dict[str, str] = field(default_factory=dict)


def entry(host: str, document: dict[str, Any]) -> dict[str, Any]:
    """The `memento` server entry of a host's configuration document."""
    key = {"vscode": "servers", "codex": "mcp_servers"}.get(host, "mcpServers")
    assert set(document[key]) == {"memento"}, f"{host}: expected one server named memento under {key!r}"
    found: dict[str, Any] = document[key]["memento"]
    return found


def server_of(host: str, document: dict[str, Any], environ: dict[str, str], prompts: dict[str, str]) -> Stdio | Http:
    """What `host` starts or connects to for this configuration, in an environment `environ`,
    with `prompts` answering VS Code's input prompts by id."""
    server = entry(host, document)
    expand = _expander(host, document, environ, prompts)
    if host == "codex":
        return _codex(server, environ)
    kind = server.get("type", "http" if "url" in server else "stdio")
    assert host != "vscode" or "type" in server, "VS Code: every server needs a type"
    if kind == "stdio":
        assert "url" not in server, f"{host}: a stdio server has no url"
        env = {k: expand(v) for k, v in server.get("env", {}).items()}
        return Stdio(expand(server["command"]), [expand(a) for a in server.get("args", [])], env)
    assert kind == "http", f"{host}: unknown server type {kind!r}"
    assert host != "claude-desktop", "Claude Desktop starts only stdio servers from its configuration file"
    return Http(expand(server["url"]), {k: expand(v) for k, v in server.get("headers", {}).items()})


def _codex(server: dict[str, Any], environ: dict[str, str]) -> Stdio | Http:
    # Codex expands nothing in config.toml; it reads named variables instead.
    if "command" in server:
        assert "url" not in server
        return Stdio(server["command"], list(server.get("args", [])), dict(server.get("env", {})))
    headers = dict(server.get("http_headers", {}))
    headers.update({name: environ[var] for name, var in server.get("env_http_headers", {}).items()})
    if "bearer_token_env_var" in server:
        headers["Authorization"] = f"Bearer {environ[server['bearer_token_env_var']]}"
    return Http(server["url"], headers)


def _expander(host: str, document: dict[str, Any], environ: dict[str, str], prompts: dict[str, str]) -> Callable[[str], str]:
    """A function expanding `${...}` the way `host` does (and failing on what it does not)."""
    inputs = {i["id"]: i for i in document.get("inputs", [])}

    def variable(match: re.Match[str]) -> str:
        name = match.group(1)
        if host in ("claude-code", "gemini"):  # ${VAR} and ${VAR:-default}
            var, _, default = name.partition(":-")
            return environ.get(var, default)
        if host in ("cursor", "vscode") and name.startswith("env:"):
            return environ[name[4:]]
        if host == "vscode" and name.startswith("input:"):
            declared = inputs[name[6:]]  # an undeclared input is an error in VS Code
            assert declared.get("password") is True, "a key input should be a password prompt"
            return prompts[name[6:]]
        raise AssertionError(f"{host} does not expand ${{{name}}}")

    def expand(value: str) -> str:
        if host in ("claude-desktop", "codex"):
            return value  # no expansion: a `${...}` is passed on as written
        return re.sub(r"\$\{([^}]+)\}", variable, value)

    return expand
