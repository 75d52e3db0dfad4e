-- PostgreSQL only. Do's claim, in one statement that inserts nothing (Do
-- writes the key's row once, complete with its answer, by record_key):
-- try the transaction-scoped advisory lock of the claim's (scope, key,
-- fingerprint), $3, and, only with it held, the lock of the key alone, $4;
-- and read the key's committed record, should there be one.
--
-- A concurrent claim of the same request holds $3: this one then tries
-- nothing more (the caller waits for $3, with wait_claim). A concurrent
-- claim of another request with this key holds $4 but not this $3: a
-- mismatch. No lock is waited for here, so replays of a committed key
-- never queue. The record comes from the statement's snapshot, taken
-- before the locks: a claim that commits in between is found by
-- record_key's conflict, or by the caller reading again.
with mine as materialized (
  select pg_try_advisory_xact_lock($3) as held)
select mine.held,
       case when mine.held then pg_try_advisory_xact_lock($4) else false end,
       k.fingerprint is not null,
       k.fingerprint, k.state, k.recovery_point, k.data, k.token, k.lease_until,
       coalesce(k.lease_until > @now@, false),
       k.response_status, k.response_header, k.response_body,
       k.created_at, k.updated_at, k.expires_at
from mine left join @schema@.idempotency_keys k on k.scope = $1 and k.key = $2
