-- Whether the exact term ended because a replacing run revoked it.
select revoke_requested_at is not null
from @schema@.job_leases
where job_key = $1 and lease_owner = $2 and fencing_token = $3
