-- baton:compatible-down-to 9
-- Mixed fleets (issue 16): each daemon and relay records the baton that
-- runs it, and each job the lowest daemon feature level that runs it as
-- defined (package scheduler, FeatureLevel).
--
-- Every column has a default, so binaries that predate this migration keep
-- working on it (hence compatible-down-to, for the version gate): their
-- inserts leave version '' (status: "unknown") and feature_level 0. They
-- also ignore min_level, since their claim queries do not read it: the
-- feature-level gate holds from this version on, among daemons that know
-- of it.
--
-- min_level holds for the definition whose version is min_level_version
-- only. A binary that predates this migration rewrites a job's definition
-- without touching these columns; the level written for the definition
-- before it must not hold for the new one, and does not, since the
-- versions differ (the claim queries compare them).
alter table @schema@.daemons
  add column version       text    not null default '',
  add column feature_level integer not null default 0;

alter table @schema@.outbox_relays
  add column version text not null default '';

alter table @schema@.jobs
  add column min_level         integer not null default 0,
  add column min_level_version text    not null default '';
