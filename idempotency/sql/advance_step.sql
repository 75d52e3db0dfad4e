-- Record the recovery point a step reached, in the step's transaction, and
-- renew the lease with it. Only the current term may: a stale holder's
-- update matches no row and its step rolls back.
update @schema@.idempotency_keys
set recovery_point = $4, data = $5, lease_until = @after($6)@, updated_at = @now@
where scope = $1 and key = $2 and token = $3 and state = 'in_flight'
