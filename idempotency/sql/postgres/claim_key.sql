-- PostgreSQL only. Claim a key for Do in one round trip: insert_key's
-- insert, with claim_lock's bound and lock, and then the bound lifted.
-- Bound the transaction's lock waits to $4; try the advisory lock of the
-- claim's (scope, key, fingerprint), $5, without waiting; insert the key's
-- uncommitted row only if this transaction holds it; give the transaction
-- back the lock_timeout it had, for the business write.
--
-- held false: a concurrent claim with this fingerprint holds the lock, and
-- nothing was inserted (the caller waits for it with claim_lock). token
-- NULL: the key exists, committed by an earlier call. The insert waits on
-- an uncommitted row of the same key until the bound (55P03).
--
-- Each materialized CTE reads the one before it, so they run in order, and
-- the last select's set_config runs once the join has read the insert.
with prior as materialized (
  select current_setting('lock_timeout') as lock_timeout),
bounded as materialized (
  select set_config('lock_timeout', $4, true) from prior),
locked as materialized (
  select pg_try_advisory_xact_lock($5) as held from bounded),
claimed as (
  insert into @schema@.idempotency_keys (scope, key, fingerprint, state, created_at, updated_at)
  select $1, $2, $3, 'in_flight', @now@, @now@ from locked where held
  on conflict (scope, key) do nothing
  returning token)
select locked.held, claimed.token is not null, set_config('lock_timeout', prior.lock_timeout, true)
from prior cross join locked left join claimed on true
