"""Memento: a persistent memory server for LLM agents."""

import os as _os

# Every OpenMP runtime in the process reads its wait policy once, when it is loaded; the first
# one loaded (usearch's, through numkong) also runs the local model's parallel code. Its
# default, spinning ~300,000 rounds at every barrier, made each embedding crawl for seconds
# beside busy processes (issue 19), so threads that wait sleep, after a short spin (~1,000
# rounds): a partner that is running arrives within it, and sleeping at each of a query's ~100
# barriers cost more than the second thread gained (docs/embeddings.md). A policy the user set
# wins, and then nothing else is set.
if "OMP_WAIT_POLICY" not in _os.environ:
    _os.environ["OMP_WAIT_POLICY"] = "passive"
    _os.environ.setdefault("GOMP_SPINCOUNT", "1000")

__version__ = "0.2.0"
