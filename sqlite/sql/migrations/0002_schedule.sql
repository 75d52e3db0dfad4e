-- The durable schedule (package scheduler), as in PostgreSQL's 0004_schedule.
-- Times are integers: microseconds since the Unix epoch, by this host's
-- clock (one host shares one clock).
CREATE TABLE jobs (
  name         TEXT PRIMARY KEY,
  version      TEXT NOT NULL,
  definition   TEXT NOT NULL,
  next_tick_at INTEGER,
  paused       INTEGER NOT NULL DEFAULT 0,
  paused_note  TEXT NOT NULL DEFAULT '',
  defined_by   TEXT NOT NULL,
  defined_at   INTEGER NOT NULL,
  removed_at   INTEGER
) STRICT;
CREATE INDEX jobs_due ON jobs (next_tick_at) WHERE NOT paused AND removed_at IS NULL;

CREATE TABLE ticks (
  job         TEXT NOT NULL,
  tick_at     INTEGER NOT NULL,
  version     TEXT NOT NULL,
  kind        TEXT NOT NULL,
  state       TEXT NOT NULL,
  outcome     TEXT,
  reason      TEXT NOT NULL DEFAULT '',
  attempts    INTEGER NOT NULL DEFAULT 0,
  not_before  INTEGER,
  claimed_by  TEXT NOT NULL DEFAULT '',
  claim_until INTEGER NOT NULL,
  host        TEXT NOT NULL DEFAULT '',
  token       INTEGER NOT NULL DEFAULT 0,
  run_id      TEXT NOT NULL DEFAULT '',
  started_at  INTEGER,
  ended_at    INTEGER,
  exit_code   INTEGER,
  output      TEXT NOT NULL DEFAULT '',
  created_at  INTEGER NOT NULL DEFAULT (cast(unixepoch('subsec') * 1000000 AS INTEGER)),
  PRIMARY KEY (job, tick_at)
) STRICT;
CREATE INDEX ticks_open ON ticks (claim_until) WHERE state <> 'done';

CREATE TABLE attempts (
  job        TEXT NOT NULL,
  tick_at    INTEGER NOT NULL,
  attempt    INTEGER NOT NULL,
  daemon     TEXT NOT NULL,
  host       TEXT NOT NULL,
  token      INTEGER NOT NULL,
  run_id     TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  ended_at   INTEGER,
  exit_code  INTEGER,
  outcome    TEXT,
  reason     TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (job, tick_at, attempt),
  FOREIGN KEY (job, tick_at) REFERENCES ticks ON DELETE CASCADE
) STRICT;

CREATE TABLE daemons (
  id         TEXT PRIMARY KEY,
  host       TEXT NOT NULL,
  pid        INTEGER NOT NULL,
  config     TEXT NOT NULL,
  versions   TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  seen_at    INTEGER NOT NULL
) STRICT;
