-- The transactional outbox (package outbox), as in PostgreSQL's
-- 0006_outbox. SQLite's write transactions are exclusive, so enqueue and
-- settle need no lock to keep one head per ordering key. Times are
-- integers: microseconds since the Unix epoch, by this host's clock.
CREATE TABLE outbox (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  topic         TEXT NOT NULL,
  event_key     TEXT NOT NULL UNIQUE,
  ordering_key  TEXT,
  payload       TEXT NOT NULL,
  headers       TEXT NOT NULL DEFAULT '{}',
  state         TEXT NOT NULL DEFAULT 'pending'
                CHECK (state IN ('pending', 'delivered', 'dead', 'skipped')),
  is_head       INTEGER NOT NULL,
  attempts      INTEGER NOT NULL DEFAULT 0,
  available_at  INTEGER NOT NULL DEFAULT (cast(unixepoch('subsec') * 1000000 AS INTEGER)),
  claim_token   TEXT,
  claim_until   INTEGER,
  claimed_by    TEXT,
  last_error    TEXT,
  created_at    INTEGER NOT NULL DEFAULT (cast(unixepoch('subsec') * 1000000 AS INTEGER)),
  done_at       INTEGER
) STRICT;
CREATE INDEX outbox_ready ON outbox (id) WHERE state = 'pending' AND is_head;
CREATE INDEX outbox_open_key ON outbox (ordering_key, id)
  WHERE state IN ('pending', 'dead') AND ordering_key IS NOT NULL;
CREATE INDEX outbox_open_topic ON outbox (topic, created_at) WHERE state IN ('pending', 'dead');
CREATE INDEX outbox_done ON outbox (done_at) WHERE state IN ('delivered', 'skipped');

CREATE TABLE outbox_relays (
  id         TEXT PRIMARY KEY,
  host       TEXT NOT NULL,
  pid        INTEGER NOT NULL,
  sink       TEXT NOT NULL,
  topics     TEXT NOT NULL,
  started_at INTEGER NOT NULL DEFAULT (cast(unixepoch('subsec') * 1000000 AS INTEGER)),
  seen_at    INTEGER NOT NULL DEFAULT (cast(unixepoch('subsec') * 1000000 AS INTEGER)),
  delivered  INTEGER NOT NULL DEFAULT 0,
  failed     INTEGER NOT NULL DEFAULT 0
) STRICT;
