"""Memento: a persistent memory server for LLM agents."""

import os as _os

# Every OpenMP runtime in the process reads its wait policy once, when it is loaded; the first
# one loaded (usearch's, through numkong) also runs the local model's parallel code. Its
# default, spinning at every barrier, made each embedding crawl for seconds beside busy
# processes (issue 19, docs/embeddings.md), so threads that wait sleep. A value the user set wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "passive")

__version__ = "0.2.0"
