-- Take over a key whose lease expired (its holder died or stalled): a new
-- term with the next token, resuming at the recovery point recorded last.
-- The token is above the epoch's base (see insert_lease).
update @schema@.idempotency_keys
set token = greatest(token, @token_base@) + 1, lease_until = @after($4)@, updated_at = @now@
where scope = $1 and key = $2 and fingerprint = $3
  and state = 'in_flight' and lease_until <= @now@
returning token, recovery_point, data
