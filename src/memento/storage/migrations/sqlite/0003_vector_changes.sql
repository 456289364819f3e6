-- A change log for the vector indexes, kept by the database itself. Each process holds its own
-- in-memory index; another server, the CLI or `memento reindex` may write the same file. Every
-- write to fragment_embeddings, by any path (remember, amend, backfill, reindex, delete and its
-- cascade, import), stamps the fragment's seq with the next value of vector_clock. An index
-- remembers the value it has caught up to and, before it answers, loads only what changed since.
CREATE TABLE vector_clock (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    value    INTEGER NOT NULL,
    instance TEXT    NOT NULL  -- names this database, so a saved index is never loaded into another
);
INSERT INTO vector_clock (id, value, instance) VALUES (1, 0, lower(hex(randomblob(16))));

-- One row per fragment that ever had a vector: only its latest change matters. A deleted
-- fragment's row stays as the tombstone that tells other indexes to drop it.
CREATE TABLE vector_changes (
    seq      INTEGER PRIMARY KEY,
    agent_id TEXT    NOT NULL,
    change   INTEGER NOT NULL
);
CREATE INDEX vector_changes_agent ON vector_changes(agent_id, change);
INSERT INTO vector_changes (seq, agent_id, change) SELECT seq, agent_id, 0 FROM fragment_embeddings;

CREATE TRIGGER fragment_embeddings_insert_logged AFTER INSERT ON fragment_embeddings BEGIN
    UPDATE vector_clock SET value = value + 1 WHERE id = 1;
    INSERT OR REPLACE INTO vector_changes (seq, agent_id, change)
        VALUES (new.seq, new.agent_id, (SELECT value FROM vector_clock WHERE id = 1));
END;

CREATE TRIGGER fragment_embeddings_update_logged AFTER UPDATE ON fragment_embeddings BEGIN
    UPDATE vector_clock SET value = value + 1 WHERE id = 1;
    INSERT OR REPLACE INTO vector_changes (seq, agent_id, change)
        VALUES (new.seq, new.agent_id, (SELECT value FROM vector_clock WHERE id = 1));
END;

CREATE TRIGGER fragment_embeddings_delete_logged AFTER DELETE ON fragment_embeddings BEGIN
    UPDATE vector_clock SET value = value + 1 WHERE id = 1;
    INSERT OR REPLACE INTO vector_changes (seq, agent_id, change)
        VALUES (old.seq, old.agent_id, (SELECT value FROM vector_clock WHERE id = 1));
END;

-- The per-agent generation counters it replaces were bumped by the writing process only.
DROP TABLE vector_generations;
