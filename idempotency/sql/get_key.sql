-- One key's record, with whether its lease is live by the store's clock.
select fingerprint, state, recovery_point, data, token, lease_until,
       coalesce(lease_until > @now@, false),
       response_status, response_header, response_body,
       created_at, updated_at, expires_at
from @schema@.idempotency_keys
where scope = $1 and key = $2
