-- End each exact term now, keeping its row and its token. One statement for
-- any number of terms (Release passes one, ReleaseAll a batch): $1 the job
-- keys, $2 the owners, $3 the tokens. Returns the terms it ended; a term not
-- returned had already expired or been taken over. Rows are locked in order
-- of job key, as lease_acquire.sql takes them.
with c as (
  select * from unnest($1::text[], $2::uuid[], $3::int8[]) as c(job_key, owner, token)
), mine as (
  select l.job_key from @schema@.job_leases l join c
      on l.job_key = c.job_key and l.lease_owner = c.owner and l.fencing_token = c.token
   where l.released_at is null and l.lease_until > clock_timestamp()
   order by l.job_key
     for no key update of l
)
update @schema@.job_leases l
set lease_until = clock_timestamp(), released_at = clock_timestamp()
from c
where l.job_key in (select job_key from mine)
  and l.job_key = c.job_key and l.lease_owner = c.owner and l.fencing_token = c.token
  and l.released_at is null and l.lease_until > clock_timestamp()
returning l.job_key, l.fencing_token
