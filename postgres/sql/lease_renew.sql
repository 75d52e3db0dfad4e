-- Extend the exact term, only while it is unexpired by the database's clock
-- and no replacing run has asked it to end.
update @schema@.job_leases
set lease_until = clock_timestamp() + $4 * interval '1 millisecond'
where job_key = $1 and lease_owner = $2 and fencing_token = $3
  and released_at is null and lease_until > clock_timestamp()
  and revoke_requested_at is null
returning lease_until
