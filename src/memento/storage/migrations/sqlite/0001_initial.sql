-- 000 §3.1-§3.5 on SQLite. Arrays are JSON text; the keyword array is also normalised into
-- fragment_keywords, the SQLite counterpart of the GIN index.
CREATE TABLE fragments (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    id               TEXT    NOT NULL UNIQUE,
    content          TEXT    NOT NULL,
    topic            TEXT    NOT NULL,
    keywords         TEXT    NOT NULL DEFAULT '[]',
    type             TEXT    NOT NULL CHECK (type IN ('fact','decision','error','preference','procedure','relation','episode')),
    importance       REAL    NOT NULL CHECK (importance >= 0.0 AND importance <= 1.0),
    content_hash     TEXT    NOT NULL,
    source           TEXT,
    linked_to        TEXT    NOT NULL DEFAULT '[]',
    agent_id         TEXT    NOT NULL DEFAULT 'default',
    access_count     INTEGER NOT NULL DEFAULT 0,
    accessed_at      TEXT,
    created_at       TEXT    NOT NULL,
    ttl_tier         TEXT    NOT NULL CHECK (ttl_tier IN ('hot','warm','cold','permanent')),
    estimated_tokens INTEGER NOT NULL DEFAULT 0,
    utility_score    REAL    NOT NULL DEFAULT 1.0,
    verified_at      TEXT,
    is_anchor        INTEGER NOT NULL DEFAULT 0,
    session_id       TEXT
);
CREATE UNIQUE INDEX fragments_hash_permanent ON fragments(agent_id, content_hash) WHERE session_id IS NULL;
CREATE UNIQUE INDEX fragments_hash_session ON fragments(agent_id, session_id, content_hash) WHERE session_id IS NOT NULL;
CREATE INDEX fragments_topic ON fragments(agent_id, topic);
CREATE INDEX fragments_type ON fragments(agent_id, type);
CREATE INDEX fragments_importance ON fragments(agent_id, importance DESC);
CREATE INDEX fragments_created ON fragments(agent_id, created_at DESC);
CREATE INDEX fragments_tier_created ON fragments(ttl_tier, created_at);
CREATE INDEX fragments_source ON fragments(source);
CREATE INDEX fragments_verified ON fragments(verified_at);
CREATE INDEX fragments_anchor ON fragments(is_anchor) WHERE is_anchor = 1;
CREATE INDEX fragments_session ON fragments(session_id) WHERE session_id IS NOT NULL;

CREATE TABLE fragment_keywords (
    keyword TEXT    NOT NULL,
    seq     INTEGER NOT NULL REFERENCES fragments(seq) ON DELETE CASCADE,
    PRIMARY KEY (keyword, seq)
) WITHOUT ROWID;
CREATE INDEX fragment_keywords_seq ON fragment_keywords(seq);

CREATE TABLE fragment_links (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    from_id       TEXT NOT NULL REFERENCES fragments(id) ON DELETE CASCADE,
    to_id         TEXT NOT NULL REFERENCES fragments(id) ON DELETE CASCADE,
    relation_type TEXT NOT NULL CHECK (relation_type IN ('related','caused_by','resolved_by','part_of','contradicts','superseded_by')),
    created_at    TEXT NOT NULL,
    UNIQUE (from_id, to_id)
);
CREATE INDEX fragment_links_to ON fragment_links(to_id);

CREATE TABLE fragment_versions (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    fragment_id TEXT NOT NULL REFERENCES fragments(id) ON DELETE CASCADE,
    content     TEXT NOT NULL,
    topic       TEXT NOT NULL,
    keywords    TEXT NOT NULL,
    type        TEXT NOT NULL,
    importance  REAL NOT NULL,
    amended_at  TEXT NOT NULL,
    amended_by  TEXT NOT NULL
);
CREATE INDEX fragment_versions_fragment ON fragment_versions(fragment_id);

CREATE TABLE tool_feedback (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id     TEXT NOT NULL,
    tool_name    TEXT NOT NULL,
    relevant     INTEGER NOT NULL,
    sufficient   INTEGER NOT NULL,
    suggestion   TEXT,
    context      TEXT,
    session_id   TEXT,
    trigger_type TEXT NOT NULL DEFAULT 'voluntary' CHECK (trigger_type IN ('sampled','voluntary')),
    created_at   TEXT NOT NULL
);

CREATE TABLE task_feedback (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id         TEXT NOT NULL,
    session_id       TEXT NOT NULL,
    overall_success  INTEGER NOT NULL,
    tool_highlights  TEXT NOT NULL DEFAULT '[]',
    tool_pain_points TEXT NOT NULL DEFAULT '[]',
    created_at       TEXT NOT NULL
);

-- Derived data: embeddings (rebuilt by `memento reindex`) and a per-agent generation counter
-- that tells a saved ANN index whether it is still current.
CREATE TABLE fragment_embeddings (
    seq      INTEGER PRIMARY KEY REFERENCES fragments(seq) ON DELETE CASCADE,
    agent_id TEXT    NOT NULL,
    model    TEXT    NOT NULL,
    dim      INTEGER NOT NULL,
    vector   BLOB    NOT NULL
);
CREATE INDEX fragment_embeddings_agent ON fragment_embeddings(agent_id, model);

CREATE TABLE vector_generations (
    agent_id   TEXT PRIMARY KEY,
    generation INTEGER NOT NULL
);

CREATE VIRTUAL TABLE fragments_fts USING fts5(
    terms, topic,
    content = '', contentless_delete = 1,
    tokenize = 'unicode61 remove_diacritics 2'
);
