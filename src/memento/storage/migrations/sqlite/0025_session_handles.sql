-- MCP 2026-07-28 has no protocol session: a client that wants one opens a server-minted handle
-- (the `session` tool) and passes it as a tool argument (docs/mcp.md "Sessions at 2026-07-28").
-- The handle itself is never stored, only its SHA-256 (`digest`): a copy of the database does
-- not let anyone use it. A handle belongs to the namespace (agent_id) and the credential
-- (`principal`, kind:subject) that opened it; `session_id` is the working-memory session it
-- stands for (000's scope=session, 002's session scope). It expires when unused past
-- `expires_at` (pushed forward by `idle_seconds` at every use); the lifecycle then ends it
-- like a closed session.
CREATE TABLE session_handles (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    digest       TEXT    NOT NULL UNIQUE,
    agent_id     TEXT    NOT NULL,
    principal    TEXT    NOT NULL,
    session_id   TEXT    NOT NULL,
    idle_seconds INTEGER NOT NULL CHECK (idle_seconds > 0),
    created_at   TEXT    NOT NULL,
    used_at      TEXT    NOT NULL,
    expires_at   TEXT    NOT NULL
);
CREATE INDEX session_handles_expiry ON session_handles(expires_at);
CREATE INDEX session_handles_agent ON session_handles(agent_id, expires_at);
