"""A virtual environment with Memento's runtime dependencies only, for end-to-end servers.

The test venv holds the test extras too (`mcp` pulls in python-multipart, for one), so a
server started from it would hide a missing runtime dependency. End-to-end tests start the
server from this one instead: `pip install -e .[postgres,redis]` and nothing else, built once
per clone in `.venv-runtime/` (git-ignored) and rebuilt when pyproject.toml changes (its hash is
the stamp). A lock file keeps concurrent pytest runs from building it twice.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv-runtime"
EXTRAS = "postgres,redis"  # the server's optional backends; never the `test` extra
STAMP = ".memento-runtime"
BUILD_TIMEOUT_S = 1800


def _key() -> str:
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes())
    digest.update(EXTRAS.encode())
    return digest.hexdigest()


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _current(venv: Path, key: str) -> bool:
    stamp = venv / STAMP
    return _python(venv).exists() and stamp.exists() and stamp.read_text().strip() == key


def _build(target: Path) -> None:
    shutil.rmtree(target, ignore_errors=True)
    # sys._base_executable: a venv made from the test venv's python would still be a clean one,
    # but the base interpreter says so plainly.
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(target)], check=True, timeout=BUILD_TIMEOUT_S)
    pip = [str(_python(target)), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "-e", f"{ROOT}[{EXTRAS}]"], check=True, timeout=BUILD_TIMEOUT_S, stdout=sys.stderr, stderr=sys.stderr)


def runtime_venv() -> Path:
    """The runtime-only environment's folder (for MEMENTO_VENV), built first if needed."""
    return Path(runtime_python()).parents[1]


def runtime_python() -> str:
    """The runtime-only environment's python, building (or rebuilding) it first if needed."""
    key = _key()
    if _current(VENV, key):
        return str(_python(VENV))
    with (ROOT / ".venv-runtime.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run may be building it right now
        if not _current(VENV, key):
            print(f"building the runtime-only environment in {VENV}", file=sys.stderr)
            staging = VENV.with_name(VENV.name + ".new")
            _build(staging)
            (staging / STAMP).write_text(key)
            # scripts/_venv.sh's own stamp: scripts/conformance, pointed here with MEMENTO_VENV,
            # then serves from this environment without installing anything into it.
            (staging / ".memento-installed").touch()
            shutil.rmtree(VENV, ignore_errors=True)
            # bin/python is a symlink to the base interpreter and the editable install points at
            # src/, so the finished venv can move into place.
            staging.rename(VENV)
            _relocate_scripts(VENV, staging)
    return str(_python(VENV))


def _relocate_scripts(venv: Path, staging: Path) -> None:
    """Console scripts (bin/memento, ...) name the interpreter they were installed with: point
    their #! line at the venv's final place, so `memento` on PATH runs as a user's would."""
    old = f"#!{staging}/".encode()
    for script in (venv / "bin").iterdir():
        if script.is_file() and not script.is_symlink():
            content = script.read_bytes()
            if content.startswith(old):
                script.write_bytes(f"#!{venv}/".encode() + content[len(old) :])
