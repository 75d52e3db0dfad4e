-- baton:compatible-down-to 14
-- Per-host jobs (scope: host, and @reboot; issue 41): a host-scoped job is
-- stored once for each host that runs a daemon, as NAME@HOST, and host
-- names that host. Only that host's daemons claim its due ticks and its
-- open ticks (claim_jobs, claim_ticks); '' is a fleet job, which any
-- daemon claims, as before.
--
-- The column has a default, so binaries that predate this migration keep
-- working on it: they write fleet jobs, and leave the host instances
-- alone, since those need feature level 4 (scheduler.FeatureLevel).
alter table @schema@.jobs
  add column host text not null default '';
