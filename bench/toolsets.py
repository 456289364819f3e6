"""Print what each toolset's tools/list costs a client, in cl100k tokens, per MCP revision.

    python bench/toolsets.py [--structured]

The figures are the compact JSON of the tools/list result as the server sends it; docs/toolsets.md
carries them (tests/test_toolsets.py checks that the page is current).
"""

from __future__ import annotations

import sys

from memento.mcp import versions
from memento.mcp.toolsets import REGISTRY, list_tokens


def main() -> None:
    structured = "--structured" in sys.argv[1:]  # as served with MEMENTO_STRUCTURED_OUTPUT=1
    print("| Toolset | Tools | " + " | ".join(versions.REVISIONS) + " |")
    print("|---|---|" + "---|" * len(versions.REVISIONS))
    for name in REGISTRY.names():
        tools = REGISTRY.get(name).tools
        figures = " | ".join(f"{list_tokens(tools, v, structured=structured):,}" for v in versions.REVISIONS)
        print(f"| `{name}` | {len(tools)} | {figures} |")


if __name__ == "__main__":
    main()
