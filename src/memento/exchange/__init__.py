"""Export and import of whole memories (docs/export.md): the memento export format version 2
(lossless NDJSON), Markdown and CSV, streamed through the RecordStore protocol; the MCP tool,
the REST routes and the command line are faces over it."""
