-- Store the response that later calls replay, in the transaction of the
-- business write (Do) or of the final step (Steps, fenced by the token),
-- and start the key's retention.
update @schema@.idempotency_keys
set state = 'complete', recovery_point = $4, data = $5,
    response_status = $6, response_header = $7, response_body = $8,
    lease_until = null, expires_at = @after($9)@, updated_at = @now@
where scope = $1 and key = $2 and token = $3 and state = 'in_flight'
