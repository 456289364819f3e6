"""The MCP face: JSON-RPC core, version rules, the eleven tools, stdio and Streamable HTTP."""

from memento.mcp.http import serve_http
from memento.mcp.stdio import serve_stdio

__all__ = ["serve_http", "serve_stdio"]
