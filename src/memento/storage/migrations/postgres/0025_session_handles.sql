-- MCP 2026-07-28 has no protocol session: a client that wants one opens a server-minted handle
-- (the `session` tool) and passes it as a tool argument (docs/mcp.md "Sessions at 2026-07-28").
-- The handle itself is never stored, only its SHA-256 (`digest`): a copy of the database does
-- not let anyone use it. A handle belongs to the namespace (agent_id) and the credential
-- (`principal`, kind:subject) that opened it; `session_id` is the working-memory session it
-- stands for (000's scope=session, 002's session scope). It expires when unused past
-- `expires_at` (pushed forward by `idle_seconds` at every use); the lifecycle then ends it
-- like a closed session. Row-level security isolates each namespace's handles (the
-- maintenance agents, which sweep the expired ones, see every row).
CREATE TABLE agent_memory.session_handles (
    seq          BIGSERIAL   PRIMARY KEY,
    digest       TEXT        NOT NULL UNIQUE,
    agent_id     TEXT        NOT NULL,
    principal    TEXT        NOT NULL,
    session_id   TEXT        NOT NULL,
    idle_seconds INTEGER     NOT NULL CHECK (idle_seconds > 0),
    created_at   TIMESTAMPTZ NOT NULL,
    used_at      TIMESTAMPTZ NOT NULL,
    expires_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX session_handles_expiry ON agent_memory.session_handles (expires_at);
CREATE INDEX session_handles_agent ON agent_memory.session_handles (agent_id, expires_at);

ALTER TABLE agent_memory.session_handles ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory.session_handles FORCE ROW LEVEL SECURITY;
CREATE POLICY session_handle_isolation_policy ON agent_memory.session_handles
    USING (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'))
    WITH CHECK (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'));
