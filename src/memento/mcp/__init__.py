"""The MCP face: JSON-RPC core, version rules, the tools, and the stdio and Streamable HTTP
transports. The HTTP server itself is composed by `memento.web`."""
