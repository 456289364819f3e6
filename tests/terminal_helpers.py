"""Run a command with some of its standard streams on a real pseudo-terminal, as a person at a
terminal would (tests of what Memento does differently there: prompts, progress bars, text logs)."""

from __future__ import annotations

import os
import pty
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from runtime_env import runtime_python

TIMEOUT_S = 120


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str  # when stderr was a pipe
    terminal: str  # what the terminal showed (stderr when it was on it; the echo of what was typed)


def memento_command() -> list[str]:
    """The real `memento` console script of the runtime-only environment (tests/runtime_env.py),
    run by that environment's python: the environment is built under another name and moved
    into place, so the script's own #! line names a path that no longer exists."""
    python = runtime_python()
    return [python, str(Path(python).with_name("memento"))]


def on_terminal(argv: Sequence[str], env: Mapping[str, str], *, stdin: bool = False, stderr: bool = False, typed: str = "") -> Run:
    """Run `argv` with stdin and/or stderr on a pseudo-terminal; `typed` is what the person types."""
    master, slave = pty.openpty()
    terminal_env = {**os.environ, "TERM": "xterm", "COLUMNS": "120", **env}
    process = subprocess.Popen(
        list(argv),
        env=terminal_env,
        stdin=slave if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave if stderr else subprocess.PIPE,
    )
    os.close(slave)
    if typed:
        os.write(master, typed.encode())
    shown: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every holder of the terminal's other end has closed it
                return
            if not chunk:
                return
            shown.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        out, err = process.communicate(timeout=TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    reader.join(TIMEOUT_S)
    os.close(master)
    terminal = b"".join(shown).decode("utf-8", "replace")
    return Run(process.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace") if err else "", terminal)
