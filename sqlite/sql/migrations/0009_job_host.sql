-- baton:compatible-down-to 8
-- Per-host jobs, as in PostgreSQL's 0015_job_host: the host whose daemons
-- run a host-scoped job's instance NAME@HOST; '' for a fleet job.
ALTER TABLE jobs ADD COLUMN host TEXT NOT NULL DEFAULT '';
