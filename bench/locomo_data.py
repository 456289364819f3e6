"""Where the benches find the LoCoMo dev split.

The split lives outside the repository, in `../shared/bench/data/locomo-dev.json` beside the
clone (its protocol: `../shared/bench/README.md`). A clone kept elsewhere names the file with
MEMENTO_LOCOMO_DATA; the tests that run benches point it at `tests/data/locomo_tiny.json`, a
small conversation in the same format written for them.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "MEMENTO_LOCOMO_DATA"
BESIDE = Path(__file__).resolve().parents[1].parent / "shared" / "bench" / "data" / "locomo-dev.json"


def locomo_dev() -> Path:
    """The LoCoMo dev split's path: MEMENTO_LOCOMO_DATA when set, else the file beside the clone."""
    named = os.environ.get(ENV, "").strip()
    return Path(named) if named else BESIDE


def missing(path: Path) -> str:
    """What to say when the split is not at `path`."""
    return f"the LoCoMo dev split is missing ({path}): place the clone beside shared/ or set {ENV} to the file"
