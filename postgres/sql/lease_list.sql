-- Every job's lease ($1 true), or only those not released ($1 false: held
-- or expired, what status and the dashboard list; a fleet keeps a free
-- lease row for every job that ever ran).
select job_key, lease_owner::text, fencing_token, lease_until, owner_host,
       owner_pid, owner_argv, owner_started_at, acquired_at,
       released_at is not null as released,
       lease_until > clock_timestamp() as live
from @schema@.job_leases
where $1::boolean or released_at is null
order by job_key
