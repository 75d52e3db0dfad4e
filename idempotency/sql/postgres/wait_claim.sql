-- PostgreSQL only. Wait for the advisory lock $2 (a concurrent claim of
-- the same request holds it until its transaction ends) at most $1 (e.g.
-- '100ms'), then give the transaction back the lock_timeout it had, for
-- the business write. lock_timeout is set with is_local, so it ends with
-- the transaction, as SET LOCAL's does, and no pooled connection keeps
-- it. The lock's wait ending fails the statement with 55P03. Each
-- materialized CTE reads the one before it, so they run in order.
with prior as materialized (
  select current_setting('lock_timeout') as lock_timeout),
bounded as materialized (
  select set_config('lock_timeout', $1, true) from prior),
locked as materialized (
  select pg_advisory_xact_lock($2) from bounded)
select set_config('lock_timeout', prior.lock_timeout, true)
from prior cross join locked
