-- Seed 004 §3's memory_link types: fragment links may also say that a memory was derived from
-- another (`derived_from`: sleep consolidation's semantic memory from its episodes) or duplicates
-- it (`duplicates`). SQLite cannot alter a CHECK constraint that rows must newly satisfy in a
-- different form, so the table is rebuilt by SQLite's documented 12-step procedure
-- (https://www.sqlite.org/lang_altertable.html#otheralter), inside the runner's transaction:
-- nothing references fragment_links, so dropping it with foreign keys on deletes nothing
-- elsewhere; it has one index and no trigger or view to recreate. The AUTOINCREMENT counter is
-- carried over, so a new link never reuses the id of a deleted one.
CREATE TABLE fragment_links_new (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    from_id       TEXT NOT NULL REFERENCES fragments(id) ON DELETE CASCADE,
    to_id         TEXT NOT NULL REFERENCES fragments(id) ON DELETE CASCADE,
    relation_type TEXT NOT NULL CHECK (relation_type IN ('related','caused_by','resolved_by','part_of','contradicts','superseded_by','derived_from','duplicates')),
    created_at    TEXT NOT NULL,
    UNIQUE (from_id, to_id)
);
INSERT INTO fragment_links_new (id, from_id, to_id, relation_type, created_at)
    SELECT id, from_id, to_id, relation_type, created_at FROM fragment_links ORDER BY id;
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'fragment_links_new', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'fragment_links_new');
UPDATE sqlite_sequence
    SET seq = MAX(seq, COALESCE((SELECT s.seq FROM sqlite_sequence s WHERE s.name = 'fragment_links'), 0))
    WHERE name = 'fragment_links_new';
DROP TABLE fragment_links;
ALTER TABLE fragment_links_new RENAME TO fragment_links;
CREATE INDEX fragment_links_to ON fragment_links(to_id);

-- Seed 004 §4.2's spaced review: a card per important memory, due at `due_at`; each review
-- (the memory shown by `context`, or recalled since its last review) moves it to the next,
-- longer interval (1, 3, 7, 14, 30 ... days). A card belongs to the agent whose memory it is;
-- deleting the memory deletes its card. The `reviews_scheduled` consolidation stage keeps the
-- cards of each namespace's most important memories and drops the others.
CREATE TABLE memory_reviews (
    fragment_id      TEXT PRIMARY KEY REFERENCES fragments(id) ON DELETE CASCADE,
    agent_id         TEXT NOT NULL,
    due_at           TEXT NOT NULL,
    interval_days    INTEGER NOT NULL CHECK (interval_days >= 1),
    reviews          INTEGER NOT NULL DEFAULT 0 CHECK (reviews >= 0),
    last_reviewed_at TEXT,
    created_at       TEXT NOT NULL
);
CREATE INDEX memory_reviews_due ON memory_reviews(agent_id, due_at);
