"""The agent hosts' command lines (`claude`, `gemini`, `codex`) and the `mcp-remote` bridge, as
scripts/hosts installs them into .tools/ (pinned, from the npm registry).

Without them the tests that need them skip, unless MEMENTO_REQUIRE_CONFORMANCE=1 (CI) makes that
a failure, like the conformance toolchain's.
"""

from __future__ import annotations

import functools
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "hosts"


@dataclass(frozen=True)
class HostTools:
    node_dir: str
    tools: dict[str, tuple[str, str]]  # name -> (version, path of its command)

    def get(self, name: str) -> tuple[str, str]:
        return self.tools[name]

    def path(self, extra: Path) -> str:
        """A PATH with `extra` (the host commands) and Node 22 first, as a user's would have them."""
        return os.pathsep.join([str(extra), self.node_dir, os.environ.get("PATH", "/usr/bin:/bin")])

    def bin_dir(self, folder: Path) -> Path:
        """`folder` holding `claude`, `gemini` and `codex`, each linked to its installed command."""
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("claude", "gemini", "codex"):
            (folder / name).symlink_to(self.tools[name][1])
        return folder


@functools.cache
def _installed() -> HostTools | str:
    check = subprocess.run(["bash", str(SCRIPT), "--check"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    if check.returncode != 0:
        return (check.stdout + check.stderr).strip() or f"scripts/hosts --check exited {check.returncode}"
    listed = subprocess.run(["bash", str(SCRIPT), "--list"], capture_output=True, text=True, timeout=60, cwd=ROOT, check=True)
    rows = {name: (version, path) for name, version, path in (line.split(" ", 2) for line in listed.stdout.splitlines())}
    node = rows.pop("node")[1]
    return HostTools(str(Path(node).parent), rows)


def host_tools_or_skip() -> HostTools:
    """The installed host command lines; skip without them (fail when they are required)."""
    found = _installed()
    if isinstance(found, HostTools):
        return found
    if os.environ.get("MEMENTO_REQUIRE_CONFORMANCE") == "1":
        pytest.fail(f"MEMENTO_REQUIRE_CONFORMANCE=1 but the host command lines are missing: {found}")
    pytest.skip(f"host command lines not installed (scripts/hosts --install-only): {found}")
