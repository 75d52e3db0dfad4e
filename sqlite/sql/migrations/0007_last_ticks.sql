-- baton:compatible-down-to 5
-- Each job's last ended tick and last success in a row of their own, kept
-- by triggers on the ticks, as in PostgreSQL's 0013_last_ticks (see there):
-- the job listing joins one row a job instead of three probes of the
-- ticks. SQLite's max() of two values is NULL when either is: hence the
-- coalesce.
CREATE TABLE last_ticks (
  job          TEXT PRIMARY KEY,
  tick_at      INTEGER NOT NULL,
  outcome      TEXT,
  succeeded_at INTEGER
) STRICT;

CREATE TRIGGER ticks_note_last_insert AFTER INSERT ON ticks
WHEN new.state = 'done'
BEGIN
  INSERT INTO last_ticks (job, tick_at, outcome, succeeded_at)
  VALUES (new.job, new.tick_at, new.outcome,
          CASE WHEN new.outcome = 'succeeded' THEN new.ended_at END)
  ON CONFLICT (job) DO UPDATE
    SET tick_at = max(last_ticks.tick_at, excluded.tick_at),
        outcome = CASE WHEN excluded.tick_at >= last_ticks.tick_at THEN excluded.outcome ELSE last_ticks.outcome END,
        succeeded_at = coalesce(max(last_ticks.succeeded_at, excluded.succeeded_at),
                                last_ticks.succeeded_at, excluded.succeeded_at);
END;

CREATE TRIGGER ticks_note_last_update AFTER UPDATE OF state, outcome, ended_at ON ticks
WHEN new.state = 'done'
BEGIN
  INSERT INTO last_ticks (job, tick_at, outcome, succeeded_at)
  VALUES (new.job, new.tick_at, new.outcome,
          CASE WHEN new.outcome = 'succeeded' THEN new.ended_at END)
  ON CONFLICT (job) DO UPDATE
    SET tick_at = max(last_ticks.tick_at, excluded.tick_at),
        outcome = CASE WHEN excluded.tick_at >= last_ticks.tick_at THEN excluded.outcome ELSE last_ticks.outcome END,
        succeeded_at = coalesce(max(last_ticks.succeeded_at, excluded.succeeded_at),
                                last_ticks.succeeded_at, excluded.succeeded_at);
END;

-- What the ticks hold now (a write transaction: nothing ends meanwhile).
INSERT INTO last_ticks (job, tick_at, outcome, succeeded_at)
SELECT t.job, t.tick_at, t.outcome,
       (SELECT max(s.ended_at) FROM ticks s WHERE s.job = t.job AND s.outcome = 'succeeded')
FROM ticks t
WHERE t.state = 'done'
  AND t.tick_at = (SELECT max(k.tick_at) FROM ticks k WHERE k.job = t.job AND k.state = 'done');
