-- End the exact term now, keeping the row and its token.
update @schema@.job_leases
set lease_until = clock_timestamp(), released_at = clock_timestamp()
where job_key = $1 and lease_owner = $2 and fencing_token = $3
  and released_at is null and lease_until > clock_timestamp()
