-- PostgreSQL only. Bound this transaction's lock waits to $1 (e.g. '100ms';
-- is_local, so the setting ends with the transaction, as SET LOCAL's does,
-- and no pooled connection keeps it), then take the advisory lock named by
-- the claim's (scope, key, fingerprint), held until the transaction ends.
-- One round trip: the materialized CTE yields its row, setting the bound,
-- before the lock is asked for.
with bounded as materialized (select set_config('lock_timeout', $1, true))
select pg_advisory_xact_lock($2) from bounded
