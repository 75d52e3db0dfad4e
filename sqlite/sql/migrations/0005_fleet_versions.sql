-- baton:compatible-down-to 4
-- Mixed versions, as in PostgreSQL's 0010_fleet_versions: each daemon and
-- relay records the baton that runs it, and each job the lowest daemon
-- feature level that runs it as defined (package scheduler, FeatureLevel),
-- for the definition whose version is min_level_version. Every column has
-- a default, so binaries that predate this migration keep working on it
-- (and ignore the gate: it holds from this version on).
ALTER TABLE daemons ADD COLUMN version TEXT NOT NULL DEFAULT '';
ALTER TABLE daemons ADD COLUMN feature_level INTEGER NOT NULL DEFAULT 0;
ALTER TABLE outbox_relays ADD COLUMN version TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN min_level INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN min_level_version TEXT NOT NULL DEFAULT '';
