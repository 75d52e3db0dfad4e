-- Claim a key for Do. The row stays uncommitted until the business write
-- commits with it, so a concurrent claim of the same key waits for it: on
-- its unique key in PostgreSQL, on the write lock in SQLite. No row back:
-- the key was committed by an earlier call.
insert into @schema@.idempotency_keys (scope, key, fingerprint, state, created_at, updated_at)
values ($1, $2, $3, 'in_flight', @now@, @now@)
on conflict (scope, key) do nothing
returning token
