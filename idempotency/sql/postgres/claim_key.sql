-- PostgreSQL only. Claim a key for Do in one round trip: insert_key's
-- insert, with claim_lock's bound and lock, the key's committed record
-- (get_key's columns), and then the bound lifted. Bound the transaction's
-- lock waits to $4; try the advisory lock of the claim's (scope, key,
-- fingerprint), $5, without waiting; insert the key's uncommitted row only
-- if this transaction holds it; give the transaction back the lock_timeout
-- it had, for the business write.
--
-- found: the statement's snapshot holds the key's committed record, which
-- comes back; then no lock is tried and nothing inserted, so that replays
-- of one key do not queue on its lock. Otherwise: held false, a
-- concurrent claim with this fingerprint holds the lock and nothing was
-- inserted (the caller waits for it with claim_lock); inserted false while
-- held, the key was committed after the snapshot began (the caller reads
-- it again). The insert waits on an uncommitted row of the same key until
-- the bound (55P03).
--
-- Each materialized CTE reads the one before it, so they run in order, and
-- the last select's set_config runs once the join has read the insert.
-- The committed record is read from the statement's snapshot, which never
-- holds the row this statement inserts.
with prior as materialized (
  select current_setting('lock_timeout') as lock_timeout),
bounded as materialized (
  select set_config('lock_timeout', $4, true) from prior),
committed as materialized (
  select fingerprint, state, recovery_point, data, token, lease_until,
         coalesce(lease_until > @now@, false) as lease_live,
         response_status, response_header, response_body,
         created_at, updated_at, expires_at
  from @schema@.idempotency_keys
  where scope = $1 and key = $2),
locked as materialized (
  select case when exists (select from committed) then false
              else pg_try_advisory_xact_lock($5) end as held
  from bounded),
claimed as (
  insert into @schema@.idempotency_keys (scope, key, fingerprint, state, created_at, updated_at)
  select $1, $2, $3, 'in_flight', @now@, @now@ from locked where held
  on conflict (scope, key) do nothing
  returning token)
select locked.held, claimed.token is not null, set_config('lock_timeout', prior.lock_timeout, true),
       committed.fingerprint is not null,
       committed.fingerprint, committed.state, committed.recovery_point, committed.data,
       committed.token, committed.lease_until, committed.lease_live,
       committed.response_status, committed.response_header, committed.response_body,
       committed.created_at, committed.updated_at, committed.expires_at
from prior cross join locked left join claimed on true left join committed on true
