-- Deleting a memory removes its id from every other memory's linked_to, and counts those
-- references: two statements that read every memory's JSON linked_to (~0.6 s at a million
-- memories, for each delete: a vault key, a REST delete, a lifecycle purge). fragment_references
-- holds one row per (id referenced, memory referring), kept by these triggers whatever writes
-- linked_to, so a delete finds the memories that refer to it by their index.
CREATE TABLE IF NOT EXISTS fragment_references (
    target TEXT    NOT NULL,
    seq    INTEGER NOT NULL,
    PRIMARY KEY (target, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS fragment_references_seq ON fragment_references(seq);

INSERT OR IGNORE INTO fragment_references (target, seq)
    SELECT j.value, f.seq FROM fragments f, json_each(f.linked_to) j WHERE f.linked_to <> '[]';

CREATE TRIGGER IF NOT EXISTS fragment_references_insert AFTER INSERT ON fragments WHEN new.linked_to <> '[]' BEGIN
    INSERT OR IGNORE INTO fragment_references (target, seq) SELECT value, new.seq FROM json_each(new.linked_to);
END;
CREATE TRIGGER IF NOT EXISTS fragment_references_update AFTER UPDATE OF linked_to ON fragments
WHEN new.linked_to IS NOT old.linked_to BEGIN
    DELETE FROM fragment_references WHERE seq = old.seq;
    INSERT OR IGNORE INTO fragment_references (target, seq) SELECT value, new.seq FROM json_each(new.linked_to);
END;
CREATE TRIGGER IF NOT EXISTS fragment_references_delete AFTER DELETE ON fragments WHEN old.linked_to <> '[]' BEGIN
    DELETE FROM fragment_references WHERE seq = old.seq;
END;
