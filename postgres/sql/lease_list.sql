select job_key, lease_owner::text, fencing_token, lease_until, owner_host,
       owner_pid, owner_argv, owner_started_at, acquired_at,
       released_at is not null as released,
       lease_until > clock_timestamp() as live
from @schema@.job_leases
order by job_key
