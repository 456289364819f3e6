"""Memento: a persistent memory server for LLM agents."""

__version__ = "0.2.0"
