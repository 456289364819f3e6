-- Server-wide secrets every replica sharing this database must agree on, by name. The first
-- replica to need one stores a random value; the others read it. `mcp_request_state` keys the
-- HMAC that seals MCP 2026-07-28 `requestState` (mcp/mrtr.py) unless MEMENTO_STATE_KEY is set.
-- Not per agent: only the server's own context (`system`) sees it. Never exported, never
-- copied by `migrate`: a lost secret only invalidates pending requests.
CREATE TABLE agent_memory.server_secrets (
    name       TEXT        PRIMARY KEY,
    value      BYTEA       NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
);

-- Only the server's own context reads or writes it, never an agent's transaction.
ALTER TABLE agent_memory.server_secrets ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory.server_secrets FORCE ROW LEVEL SECURITY;
CREATE POLICY server_secret_policy ON agent_memory.server_secrets
    USING (current_setting('app.current_agent_id', true) = 'system')
    WITH CHECK (current_setting('app.current_agent_id', true) = 'system');
