-- The full-text and keyword tiers as lookup tables that row-level security does not defeat.
--
-- Why tables: the policy on fragments is evaluated before any condition of the query that is
-- not LEAKPROOF, and neither `@@` (tsvector) nor `&&` (arrays) is, so for the application role
-- the GIN indexes of 0001 are never index conditions: every full-text and keyword query was a
-- sequential scan over the agent's fragments (EXPLAIN: `Seq Scan on fragments ... Filter:
-- (<policy>) AND (search @@ ...)`). Marking the operators LEAKPROOF needs a superuser. Text
-- equality is leakproof, so b-trees over (term, agent_id) work under the same policy.
--
-- fragment_terms: one row per (fragment, lexeme of fragments.search) with the lexeme's share
-- of ts_rank('{0, 0, 0.3, 1}', search, <OR query>, 1); for an OR query of n terms that rank is
-- the sum of the matched terms' shares divided by n, so the store ranks from index entries
-- alone. The share follows calc_rank_or() in PostgreSQL's tsrank.c: over the lexeme's
-- positions j = 1, 2, ... with weights w(j) (A 1, B 0.3, C and D 0), the sum of w(j)/j², the
-- heaviest position's own term replaced by its plain weight, divided by π²/6; then divided by
-- log2(1 + the fragment's number of positions) (normalisation 1).
--
-- fragment_keywords: one row per (fragment, distinct keyword), with the fragment's importance
-- and created_at, the keyword tier's order after the match count.
--
-- Both carry the fragment's agent_id under the policy of fragments, are written by triggers
-- (so every writer, `memento migrate` and manual SQL included, keeps them in step) and follow
-- deletes and TRUNCATE ... CASCADE through their foreign keys. The GIN indexes of 0001 stay
-- (000's index inventory; roles that bypass row-level security can use them).
SELECT set_config('app.current_agent_id', 'system', true);

CREATE FUNCTION agent_memory.term_ranks(doc tsvector) RETURNS TABLE (term TEXT, rank REAL)
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    WITH entries AS (
        SELECT e.lexeme, e.weights FROM pg_catalog.unnest(doc) AS e
    ), norm AS (
        SELECT ln(SUM(GREATEST(cardinality(entries.weights), 1)) + 1.0) / ln(2.0) AS n FROM entries
    )
    SELECT entries.lexeme, (COALESCE(share.v, 0.0) / norm.n)::real
    FROM entries, norm, LATERAL (
        SELECT (MAX(p.w) + SUM(p.w / (p.j * p.j)) - (ARRAY_AGG(p.w / (p.j * p.j) ORDER BY p.w DESC, p.j))[1]) / 1.64493406685 AS v
        FROM (
            SELECT CASE u.weight WHEN 'A' THEN 1.0::float8 WHEN 'B' THEN 0.3::float8 ELSE 0.0::float8 END AS w, u.j::float8 AS j
            FROM pg_catalog.unnest(entries.weights) WITH ORDINALITY AS u(weight, j)
        ) p
    ) share
$$;

CREATE TABLE agent_memory.fragment_terms (
    seq      BIGINT NOT NULL REFERENCES agent_memory.fragments (seq) ON DELETE CASCADE,
    term     TEXT   NOT NULL,
    agent_id TEXT   NOT NULL,
    rank     REAL   NOT NULL
);
INSERT INTO agent_memory.fragment_terms (seq, term, agent_id, rank)
    SELECT f.seq, t.term, f.agent_id, t.rank FROM agent_memory.fragments f, agent_memory.term_ranks(f.search) AS t;
-- Index-only scans answer the document-frequency probe and the ranking.
CREATE INDEX fragment_terms_lookup ON agent_memory.fragment_terms (term, agent_id) INCLUDE (seq, rank);
CREATE INDEX fragment_terms_seq ON agent_memory.fragment_terms (seq);

CREATE TABLE agent_memory.fragment_keywords (
    seq        BIGINT           NOT NULL REFERENCES agent_memory.fragments (seq) ON DELETE CASCADE,
    keyword    TEXT             NOT NULL,
    agent_id   TEXT             NOT NULL,
    importance DOUBLE PRECISION NOT NULL,
    created_at TIMESTAMPTZ      NOT NULL
);
INSERT INTO agent_memory.fragment_keywords (seq, keyword, agent_id, importance, created_at)
    SELECT DISTINCT f.seq, k.keyword, f.agent_id, f.importance, f.created_at
    FROM agent_memory.fragments f, pg_catalog.unnest(f.keywords) AS k(keyword);
CREATE INDEX fragment_keywords_lookup ON agent_memory.fragment_keywords (keyword, agent_id) INCLUDE (seq, importance, created_at);
CREATE INDEX fragment_keywords_seq ON agent_memory.fragment_keywords (seq);

CREATE FUNCTION agent_memory.fragment_terms_write() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM agent_memory.fragment_terms WHERE seq = OLD.seq;
    END IF;
    INSERT INTO agent_memory.fragment_terms (seq, term, agent_id, rank)
        SELECT NEW.seq, t.term, NEW.agent_id, t.rank FROM agent_memory.term_ranks(NEW.search) AS t;
    RETURN NULL;
END
$$;
CREATE TRIGGER fragment_terms_insert AFTER INSERT ON agent_memory.fragments
    FOR EACH ROW EXECUTE FUNCTION agent_memory.fragment_terms_write();
CREATE TRIGGER fragment_terms_update AFTER UPDATE OF search, agent_id ON agent_memory.fragments
    FOR EACH ROW WHEN (OLD.search IS DISTINCT FROM NEW.search OR OLD.agent_id IS DISTINCT FROM NEW.agent_id)
    EXECUTE FUNCTION agent_memory.fragment_terms_write();

CREATE FUNCTION agent_memory.fragment_keywords_write() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM agent_memory.fragment_keywords WHERE seq = OLD.seq;
    END IF;
    INSERT INTO agent_memory.fragment_keywords (seq, keyword, agent_id, importance, created_at)
        SELECT DISTINCT NEW.seq, k.keyword, NEW.agent_id, NEW.importance, NEW.created_at
        FROM pg_catalog.unnest(NEW.keywords) AS k(keyword);
    RETURN NULL;
END
$$;
CREATE TRIGGER fragment_keywords_insert AFTER INSERT ON agent_memory.fragments
    FOR EACH ROW EXECUTE FUNCTION agent_memory.fragment_keywords_write();
CREATE TRIGGER fragment_keywords_update AFTER UPDATE OF keywords, importance, created_at, agent_id ON agent_memory.fragments
    FOR EACH ROW WHEN (OLD.keywords IS DISTINCT FROM NEW.keywords OR OLD.importance IS DISTINCT FROM NEW.importance
        OR OLD.created_at IS DISTINCT FROM NEW.created_at OR OLD.agent_id IS DISTINCT FROM NEW.agent_id)
    EXECUTE FUNCTION agent_memory.fragment_keywords_write();

-- The policy of fragments (0001), so these tables reveal no more than the fragments do.
ALTER TABLE agent_memory.fragment_terms ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory.fragment_terms FORCE ROW LEVEL SECURITY;
CREATE POLICY fragment_terms_isolation_policy ON agent_memory.fragment_terms
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
ALTER TABLE agent_memory.fragment_keywords ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory.fragment_keywords FORCE ROW LEVEL SECURITY;
CREATE POLICY fragment_keywords_isolation_policy ON agent_memory.fragment_keywords
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
