-- The full text of a memory whose content was cut at 300 characters (seed 000 §6.2): masked like
-- the content, kept beside it so procedures and stack traces are not lost. NULL when nothing was cut.
ALTER TABLE agent_memory.fragments ADD COLUMN detail TEXT;
