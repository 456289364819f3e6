-- A tag filter read every memory's JSON tags: recall with a tag few memories have took ~1.1 s at a
-- million memories, a listing by it ~0.6 s, and so did a count. fragment_tags holds one row per
-- (tag, memory), kept by these triggers whatever writes the tags; a filter finds a rare tag's
-- memories from it and tests a common one by a lookup per row (storage/sqlfilter.py).
CREATE TABLE IF NOT EXISTS fragment_tags (
    tag TEXT    NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (tag, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS fragment_tags_seq ON fragment_tags(seq);

INSERT OR IGNORE INTO fragment_tags (tag, seq)
    SELECT t.value, f.seq FROM fragments f, json_each(f.tags) t WHERE f.tags <> '[]';

CREATE TRIGGER IF NOT EXISTS fragment_tags_insert AFTER INSERT ON fragments WHEN new.tags <> '[]' BEGIN
    INSERT OR IGNORE INTO fragment_tags (tag, seq) SELECT value, new.seq FROM json_each(new.tags);
END;
CREATE TRIGGER IF NOT EXISTS fragment_tags_update AFTER UPDATE OF tags ON fragments WHEN new.tags IS NOT old.tags BEGIN
    DELETE FROM fragment_tags WHERE seq = old.seq;
    INSERT OR IGNORE INTO fragment_tags (tag, seq) SELECT value, new.seq FROM json_each(new.tags);
END;
CREATE TRIGGER IF NOT EXISTS fragment_tags_delete AFTER DELETE ON fragments WHEN old.tags <> '[]' BEGIN
    DELETE FROM fragment_tags WHERE seq = old.seq;
END;

-- Pinned memories are few: listing or counting them read the whole namespace (~250 ms at a
-- million). The filter names `pinned = 1` literally so that this index serves it.
CREATE INDEX IF NOT EXISTS fragments_pinned ON fragments(agent_id, seq) WHERE pinned = 1;
