-- baton:compatible-down-to 5
-- Each job's last success in one index probe, as in PostgreSQL's
-- 0012_ticks_last_success: max(ended_at) of a job's succeeded ticks
-- scanned all of its ticks. Only an index: binaries that predate it run on
-- it unchanged.
CREATE INDEX ticks_succeeded ON ticks (job, ended_at) WHERE outcome = 'succeeded';
