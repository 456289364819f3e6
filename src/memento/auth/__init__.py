"""Authentication: who a request comes from, and what it may do."""
