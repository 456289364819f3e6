"""Retrieval engines: text analysis, fusion and ranking."""
