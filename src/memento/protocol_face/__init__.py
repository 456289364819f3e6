"""Seed 003's face (Memento Protocol) over the one engine: memories with expiry and linkages,
working-memory items and sections, the skip list, the identity crystal, workspaces, the context
call and distillation. Each part is a small service over MemoryService and the store protocol;
`ProtocolFace` holds them (`service.protocol`). The `protocol` toolset (mcp/protocol_tools.py)
and the REST routes under /v1 (rest/v1.py) are thin calls into it. docs/protocol.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..service import MemoryService


class ProtocolFace:
    """The parts of seed 003's face, each over `service`."""

    def __init__(self, service: MemoryService) -> None:
        self.service = service


__all__ = ["ProtocolFace"]
