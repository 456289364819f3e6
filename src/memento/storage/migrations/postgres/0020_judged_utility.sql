-- The evaluator's judgement of a memory (000 §7), kept apart from utility_score: the consolidation
-- stage `utility_recomputed` blends it into the utility it computes (storage/utility.py) instead of
-- overwriting it. NULL until the memory is judged. A store whose evaluator already judged memories
-- takes each one's latest judgement from its done job. The row-level security policies of
-- fragments cover the new column.
ALTER TABLE agent_memory.fragments ADD COLUMN judged_utility DOUBLE PRECISION;
SELECT set_config('app.current_agent_id', 'system', true);
UPDATE agent_memory.fragments f SET judged_utility = j.judged
FROM (
    SELECT DISTINCT ON (fragment_id) fragment_id, (result ->> 'utility')::double precision AS judged
    FROM agent_memory.evaluation_jobs
    WHERE status = 'done' AND result ->> 'utility' IS NOT NULL
    ORDER BY fragment_id, finished_at DESC, id DESC
) j
WHERE f.id = j.fragment_id;
