-- 000 §3.1-§3.6 on PostgreSQL, in schema agent_memory. Applied by the owner role (see
-- memento.storage.postgres.migrate); the application connects as a role that owns nothing,
-- so the row-level security policy below really applies to it.
--
-- Differences from the seed's DDL, and why:
--   * content_hash is unique per (agent_id, content_hash) for permanent memory and per
--     (agent_id, session_id, content_hash) for working memory, as on SQLite: two agents may
--     remember the same words.
--   * seq is an insertion counter used for stable keyset pages and embedding backfill.
--   * search is a tsvector built by the application from memento.analysis.index_terms (the
--     shared analyser) with array_to_tsvector, i.e. the `simple` configuration without
--     PostgreSQL's locale-dependent parser, so Korean bigrams and English stems match SQLite.
--   * importance and utility_score are DOUBLE PRECISION (SQLite REAL is 8 bytes; a 4-byte
--     REAL would turn 0.7 into 0.699999988).
--   * embedding is typed vector(N) and gets its HNSW index in the vector_dimensions migration,
--     because N is the embedder's dimension, known only at migration time.
CREATE TABLE agent_memory.fragments (
    id               TEXT        PRIMARY KEY,
    seq              BIGINT      GENERATED ALWAYS AS IDENTITY UNIQUE,
    content          TEXT        NOT NULL,
    topic            TEXT        NOT NULL,
    keywords         TEXT[]      NOT NULL DEFAULT '{}',
    type             TEXT        NOT NULL CHECK (type IN ('fact','decision','error','preference','procedure','relation','episode')),
    importance       DOUBLE PRECISION NOT NULL CHECK (importance >= 0.0 AND importance <= 1.0),
    content_hash     TEXT        NOT NULL,
    source           TEXT,
    linked_to        TEXT[]      NOT NULL DEFAULT '{}',
    agent_id         TEXT        NOT NULL DEFAULT 'default',
    access_count     INTEGER     NOT NULL DEFAULT 0,
    accessed_at      TIMESTAMPTZ,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    ttl_tier         TEXT        NOT NULL CHECK (ttl_tier IN ('hot','warm','cold','permanent')),
    estimated_tokens INTEGER     NOT NULL DEFAULT 0,
    utility_score    DOUBLE PRECISION NOT NULL DEFAULT 1.0,
    verified_at      TIMESTAMPTZ DEFAULT NOW(),
    embedding        vector,
    embedding_model  TEXT,
    is_anchor        BOOLEAN     NOT NULL DEFAULT FALSE,
    session_id       TEXT,
    search           tsvector    NOT NULL DEFAULT ''::tsvector
);
CREATE UNIQUE INDEX fragments_hash_permanent ON agent_memory.fragments (agent_id, content_hash) WHERE session_id IS NULL;
CREATE UNIQUE INDEX fragments_hash_session ON agent_memory.fragments (agent_id, session_id, content_hash) WHERE session_id IS NOT NULL;
CREATE INDEX fragments_topic ON agent_memory.fragments (topic);
CREATE INDEX fragments_type ON agent_memory.fragments (type);
CREATE INDEX fragments_keywords ON agent_memory.fragments USING gin (keywords);
CREATE INDEX fragments_importance ON agent_memory.fragments (importance DESC);
CREATE INDEX fragments_created ON agent_memory.fragments (created_at DESC);
CREATE INDEX fragments_agent ON agent_memory.fragments (agent_id);
CREATE INDEX fragments_linked_to ON agent_memory.fragments USING gin (linked_to);
CREATE INDEX fragments_tier_created ON agent_memory.fragments (ttl_tier, created_at);
CREATE INDEX fragments_source ON agent_memory.fragments (source);
CREATE INDEX fragments_verified ON agent_memory.fragments (verified_at);
CREATE INDEX fragments_anchor ON agent_memory.fragments (is_anchor) WHERE is_anchor = TRUE;
CREATE INDEX fragments_session ON agent_memory.fragments (session_id) WHERE session_id IS NOT NULL;
CREATE INDEX fragments_search ON agent_memory.fragments USING gin (search);

CREATE TABLE agent_memory.fragment_links (
    id            BIGSERIAL   PRIMARY KEY,
    from_id       TEXT        NOT NULL REFERENCES agent_memory.fragments (id) ON DELETE CASCADE,
    to_id         TEXT        NOT NULL REFERENCES agent_memory.fragments (id) ON DELETE CASCADE,
    relation_type TEXT        NOT NULL CHECK (relation_type IN ('related','caused_by','resolved_by','part_of','contradicts','superseded_by')),
    created_at    TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    UNIQUE (from_id, to_id)
);
CREATE INDEX fragment_links_from ON agent_memory.fragment_links (from_id);
CREATE INDEX fragment_links_to ON agent_memory.fragment_links (to_id);

CREATE TABLE agent_memory.fragment_versions (
    id          BIGSERIAL   PRIMARY KEY,
    fragment_id TEXT        NOT NULL REFERENCES agent_memory.fragments (id) ON DELETE CASCADE,
    content     TEXT        NOT NULL,
    topic       TEXT        NOT NULL,
    keywords    TEXT[]      NOT NULL DEFAULT '{}',
    type        TEXT        NOT NULL,
    importance  DOUBLE PRECISION NOT NULL,
    amended_at  TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    amended_by  TEXT        NOT NULL
);
CREATE INDEX fragment_versions_fragment ON agent_memory.fragment_versions (fragment_id);

CREATE TABLE agent_memory.tool_feedback (
    id           BIGSERIAL   PRIMARY KEY,
    agent_id     TEXT        NOT NULL,
    tool_name    TEXT        NOT NULL,
    relevant     BOOLEAN     NOT NULL,
    sufficient   BOOLEAN     NOT NULL,
    suggestion   TEXT,
    context      TEXT,
    session_id   TEXT,
    trigger_type TEXT        NOT NULL DEFAULT 'voluntary' CHECK (trigger_type IN ('sampled','voluntary')),
    created_at   TIMESTAMPTZ NOT NULL DEFAULT NOW()
);

CREATE TABLE agent_memory.task_feedback (
    id               BIGSERIAL   PRIMARY KEY,
    agent_id         TEXT        NOT NULL,
    session_id       TEXT        NOT NULL,
    overall_success  BOOLEAN     NOT NULL,
    tool_highlights  TEXT[]      NOT NULL DEFAULT '{}',
    tool_pain_points TEXT[]      NOT NULL DEFAULT '{}',
    created_at       TIMESTAMPTZ NOT NULL DEFAULT NOW()
);
CREATE INDEX task_feedback_session ON agent_memory.task_feedback (session_id);

-- 000 §3.6, plus WITH CHECK so that an agent cannot write a row into another agent's namespace.
-- FORCE makes the policy bind the table owner too; only superusers and BYPASSRLS roles escape it.
ALTER TABLE agent_memory.fragments ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory.fragments FORCE ROW LEVEL SECURITY;
CREATE POLICY fragment_isolation_policy ON agent_memory.fragments
    USING (
        agent_id = current_setting('app.current_agent_id', true)
        OR agent_id = 'default'
        OR current_setting('app.current_agent_id', true) IN ('system', 'admin')
    )
    WITH CHECK (
        agent_id = current_setting('app.current_agent_id', true)
        OR agent_id = 'default'
        OR current_setting('app.current_agent_id', true) IN ('system', 'admin')
    );
