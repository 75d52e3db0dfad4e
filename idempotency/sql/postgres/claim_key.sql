-- PostgreSQL only. Do's claim, which inserts nothing (Do writes the key's
-- row once, complete with its answer, by record_key): try the
-- transaction-scoped advisory lock of the claim's (scope, key,
-- fingerprint), $1, and, only with it held, the lock of the key alone,
-- $2. read_key follows, in a statement (and snapshot) of its own, so that
-- it finds what a claim that held these locks committed before them.
--
-- A concurrent claim of the same request holds $1: this one then tries
-- nothing more (the caller waits for $1, with wait_claim). A concurrent
-- claim of another request with this key holds $2 but not this $1: a
-- mismatch. No lock is waited for here, so replays of a committed key
-- never queue.
with mine as materialized (
  select pg_try_advisory_xact_lock($1) as held)
select mine.held, case when mine.held then pg_try_advisory_xact_lock($2) else false end
from mine
