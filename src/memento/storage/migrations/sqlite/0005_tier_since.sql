-- When a fragment entered its TTL tier: the lifecycle measures a tier's time from it, so one
-- consolidation run moves a fragment at most one step (hot → warm, warm → cold, cold → expired).
-- Existing rows start their current tier now: nothing is expired by the first run after the upgrade.
ALTER TABLE fragments ADD COLUMN tier_since TEXT;
UPDATE fragments SET tier_since = strftime('%Y-%m-%dT%H:%M:%f000+00:00', 'now');
