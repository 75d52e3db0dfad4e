-- Ask the exact term to end: its holder's next renewal fails, so it stops its
-- command's tree and releases the lease. The term stays valid until then.
update @schema@.job_leases
set revoke_requested_at = clock_timestamp()
where job_key = $1 and fencing_token = $2
  and released_at is null and lease_until > clock_timestamp()
  and revoke_requested_at is null
