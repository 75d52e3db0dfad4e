-- PostgreSQL only. The key's committed record, as get_key reads it, in one
-- row that is there when the key is not (found false): Do's read after its
-- claim, sent with it in one round trip.
select k.fingerprint is not null,
       k.fingerprint, k.state, k.recovery_point, k.data, k.token, k.lease_until,
       coalesce(k.lease_until > @now@, false),
       k.response_status, k.response_header, k.response_body,
       k.created_at, k.updated_at, k.expires_at
from (select) as one
left join @schema@.idempotency_keys k on k.scope = $1 and k.key = $2
