-- End the current term's lease now, keeping its token and recovery point,
-- so that a retry takes over at once instead of waiting for expiry.
update @schema@.idempotency_keys
set lease_until = @now@, updated_at = @now@
where scope = $1 and key = $2 and token = $3 and state = 'in_flight'
