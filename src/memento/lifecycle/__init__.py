"""Lifecycle engines: consolidation (and, later, evaluation and review)."""
