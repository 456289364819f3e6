-- Seed 003's working memory: structured items, the legacy markdown sections and the workspace
-- records. Every row belongs to one namespace (agent_id) and is never shared through the
-- `default` pool. `seq` orders rows created in the same instant and pages bulk copies.
CREATE TABLE workspaces (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id   TEXT NOT NULL UNIQUE,  -- the workspace's namespace (auth.principal.workspace_namespace)
    name       TEXT NOT NULL,         -- the name it was opened by
    created_at TEXT NOT NULL
);

CREATE TABLE working_memory_sections (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id   TEXT NOT NULL,
    section    TEXT NOT NULL,  -- lower snake case, at most 64 characters
    content    TEXT NOT NULL DEFAULT '',
    updated_at TEXT NOT NULL,
    UNIQUE (agent_id, section)
);

CREATE TABLE working_memory_items (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    id          TEXT NOT NULL UNIQUE,
    agent_id    TEXT NOT NULL,
    category    TEXT NOT NULL CHECK (category IN ('active_work', 'standing_decision', 'skip_list', 'waiting_for', 'session_note')),
    title       TEXT NOT NULL,
    content     TEXT NOT NULL DEFAULT '',
    status      TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'completed', 'archived')),
    priority    INTEGER NOT NULL DEFAULT 0 CHECK (priority >= 0 AND priority <= 10),
    tags        TEXT NOT NULL DEFAULT '[]',  -- JSON list, lower-cased
    next_action TEXT,
    folded      TEXT NOT NULL DEFAULT '',    -- case-folded title, content and next action (the query filter)
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE INDEX working_memory_items_order ON working_memory_items(agent_id, priority DESC, created_at DESC);
CREATE INDEX working_memory_items_status ON working_memory_items(agent_id, status);
