-- Server-wide secrets every replica sharing this database must agree on, by name. The first
-- replica to need one stores a random value; the others read it. `mcp_request_state` keys the
-- HMAC that seals MCP 2026-07-28 `requestState` (mcp/mrtr.py) unless MEMENTO_STATE_KEY is set.
-- Never exported, never copied by `migrate`: a lost secret only invalidates pending requests.
CREATE TABLE server_secrets (
    name       TEXT PRIMARY KEY,
    value      BLOB NOT NULL,
    created_at TEXT NOT NULL
);
