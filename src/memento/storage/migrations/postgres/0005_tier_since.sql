-- When a fragment entered its TTL tier: the lifecycle measures a tier's time from it, so one
-- consolidation run moves a fragment at most one step (hot → warm, warm → cold, cold → expired).
-- Existing rows start their current tier now: nothing is expired by the first run after the upgrade.
ALTER TABLE agent_memory.fragments ADD COLUMN tier_since TIMESTAMPTZ;
SELECT set_config('app.current_agent_id', 'system', true);
UPDATE agent_memory.fragments SET tier_since = now();
