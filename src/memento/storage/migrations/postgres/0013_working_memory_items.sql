-- Seed 003's working memory: structured items, the legacy markdown sections and the workspace
-- records. Every row belongs to one namespace (agent_id) and is never shared through the
-- `default` pool; row-level security isolates each table per namespace like the entity tables
-- (the maintenance agents see every row). A workspace record of the namespace `A:W` is also
-- readable by `A` (the workspaces of an agent live inside its allowance:
-- auth.principal.workspace_namespace), never writable by it. `seq` orders rows created in the
-- same instant and pages bulk copies.
CREATE TABLE agent_memory.workspaces (
    seq        BIGSERIAL   UNIQUE,
    agent_id   TEXT        PRIMARY KEY,  -- the workspace's namespace
    name       TEXT        NOT NULL,     -- the name it was opened by
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
);

CREATE TABLE agent_memory.working_memory_sections (
    seq        BIGSERIAL   UNIQUE,
    agent_id   TEXT        NOT NULL,
    section    TEXT        NOT NULL,  -- lower snake case, at most 64 characters
    content    TEXT        NOT NULL DEFAULT '',
    updated_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    PRIMARY KEY (agent_id, section)
);

CREATE TABLE agent_memory.working_memory_items (
    seq         BIGSERIAL   UNIQUE,
    id          TEXT        PRIMARY KEY,
    agent_id    TEXT        NOT NULL,
    category    TEXT        NOT NULL CHECK (category IN ('active_work', 'standing_decision', 'skip_list', 'waiting_for', 'session_note')),
    title       TEXT        NOT NULL,
    content     TEXT        NOT NULL DEFAULT '',
    status      TEXT        NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'completed', 'archived')),
    priority    INTEGER     NOT NULL DEFAULT 0 CHECK (priority >= 0 AND priority <= 10),
    tags        TEXT[]      NOT NULL DEFAULT '{}',  -- lower-cased
    next_action TEXT,
    folded      TEXT        NOT NULL DEFAULT '',    -- case-folded title, content and next action (the query filter)
    created_at  TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT NOW()
);
CREATE INDEX working_memory_items_order ON agent_memory.working_memory_items (agent_id, priority DESC, created_at DESC);
CREATE INDEX working_memory_items_status ON agent_memory.working_memory_items (agent_id, status);

ALTER TABLE agent_memory.workspaces ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory.workspaces FORCE ROW LEVEL SECURITY;
CREATE POLICY workspace_isolation_policy ON agent_memory.workspaces
    USING (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'))
    WITH CHECK (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'));
CREATE POLICY workspace_owner_read_policy ON agent_memory.workspaces FOR SELECT
    USING (
        current_setting('app.current_agent_id', true) <> ''
        AND left(agent_id, length(current_setting('app.current_agent_id', true)) + 1) = current_setting('app.current_agent_id', true) || ':'
    );

ALTER TABLE agent_memory.working_memory_sections ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory.working_memory_sections FORCE ROW LEVEL SECURITY;
CREATE POLICY section_isolation_policy ON agent_memory.working_memory_sections
    USING (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'))
    WITH CHECK (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'));

ALTER TABLE agent_memory.working_memory_items ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory.working_memory_items FORCE ROW LEVEL SECURITY;
CREATE POLICY item_isolation_policy ON agent_memory.working_memory_items
    USING (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'))
    WITH CHECK (agent_id = current_setting('app.current_agent_id', true) OR current_setting('app.current_agent_id', true) IN ('system', 'admin'));
