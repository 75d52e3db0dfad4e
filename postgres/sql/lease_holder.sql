-- The current holder of a lease, read after an acquisition found it busy.
select lease_owner::text, fencing_token, lease_until, owner_host, owner_pid,
       owner_argv, owner_started_at, acquired_at,
       lease_until > clock_timestamp() as live
from @schema@.job_leases
where job_key = $1
