-- The evaluator's judgement of a memory (000 §7), kept apart from utility_score: the consolidation
-- stage `utility_recomputed` blends it into the utility it computes (storage/utility.py) instead of
-- overwriting it. NULL until the memory is judged. A store whose evaluator already judged memories
-- takes each one's latest judgement from its done job.
ALTER TABLE fragments ADD COLUMN judged_utility REAL;
UPDATE fragments SET judged_utility = (
    SELECT CAST(json_extract(j.result, '$.utility') AS REAL) FROM evaluation_jobs j
    WHERE j.fragment_id = fragments.id AND j.status = 'done' AND json_extract(j.result, '$.utility') IS NOT NULL
    ORDER BY j.finished_at DESC, j.id DESC LIMIT 1
) WHERE id IN (SELECT fragment_id FROM evaluation_jobs WHERE status = 'done');
