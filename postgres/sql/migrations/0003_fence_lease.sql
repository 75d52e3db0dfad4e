-- fence_lease(job, token): the same-database fence. Raises SQLSTATE BF001
-- when a term with a larger token than p_token exists for the job. The lease
-- row is read FOR SHARE, so a takeover (which updates the row) waits until
-- the caller's transaction ends: no window between the check and the commit.
create or replace function @schema@.fence_lease(p_job text, p_token bigint)
returns bigint
language plpgsql
as $$
declare
  current bigint;
begin
  select l.fencing_token into current from @schema@.job_leases l where l.job_key = p_job for share;
  if current is null then
    raise exception 'baton: fence: job % has no lease', p_job using errcode = 'BF002';
  end if;
  if current > p_token then
    raise exception 'baton: fenced: write for job % with fencing token % refused: term % has been granted since', p_job, p_token, current
      using errcode = 'BF001',
            hint = 'a newer holder of the lease has taken over; this writer must stop';
  end if;
  return current;
end
$$;
