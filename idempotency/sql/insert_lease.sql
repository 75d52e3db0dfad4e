-- Claim a key for Steps with the first term of its lease, committed at
-- once: the row itself is the in-flight marker. No row back: the key exists.
-- The first token is above the epoch's base, so that a key whose record a
-- failover lost does not hand out its lost tokens again.
insert into @schema@.idempotency_keys (scope, key, fingerprint, state, token, lease_until, created_at, updated_at)
values ($1, $2, $3, 'in_flight', @token_base@ + 1, @after($4)@, @now@, @now@)
on conflict (scope, key) do nothing
returning token
