-- Idempotency keys (package idempotency), as in PostgreSQL's
-- 0005_idempotency. Times are integers: microseconds since the Unix epoch,
-- by this host's clock.
CREATE TABLE idempotency_keys (
  scope           TEXT NOT NULL,
  key             TEXT NOT NULL,
  fingerprint     TEXT NOT NULL,
  state           TEXT NOT NULL CHECK (state IN ('in_flight', 'complete')),
  recovery_point  TEXT NOT NULL DEFAULT 'started',
  data            TEXT,
  token           INTEGER NOT NULL DEFAULT 0,
  lease_until     INTEGER,
  response_status INTEGER,
  response_header TEXT,
  response_body   BLOB,
  created_at      INTEGER NOT NULL DEFAULT (cast(unixepoch('subsec') * 1000000 AS INTEGER)),
  updated_at      INTEGER NOT NULL DEFAULT (cast(unixepoch('subsec') * 1000000 AS INTEGER)),
  expires_at      INTEGER,
  PRIMARY KEY (scope, key)
) STRICT;
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at) WHERE state = 'complete';
