"""What the terminal commands share: a progress bar on stderr (drawn only when stderr is a
terminal, so scripts and logs never see one) and a yes/no question (asked only when stdin is
a terminal)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

Update = Callable[[int, int], None]  # (done, total)


def _ignore(done: int, total: int) -> None:
    return None


@contextmanager
def progress_bar(label: str, unit: str, stream: TextIO | None = None) -> Iterator[Update]:
    """A progress bar for long work: `update(done, total)` moves it. A no-op unless `stream`
    (stderr by default) is a terminal."""
    stream = stream if stream is not None else sys.stderr
    if not stream.isatty():
        yield _ignore
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), MofNCompleteColumn(), TextColumn(unit))
    with Progress(*columns, TimeRemainingColumn(), console=Console(file=stream)) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def interactive() -> bool:
    """Whether a person can answer a question (stdin is a terminal)."""
    return sys.stdin.isatty()


def confirm(question: str) -> bool:
    """Ask `question` on stderr and read the answer from stdin; only y or yes agrees."""
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")
