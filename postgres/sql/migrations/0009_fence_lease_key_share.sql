-- fence_lease no longer stalls its own holder, and refuses tokens that are
-- not a term of the job (issue 15).
--
-- Locks. fence_lease read the lease row FOR SHARE, which conflicts with
-- every UPDATE of the row, the holder's renewals included: a job whose
-- write transaction lasted past TTL/3 had its renewals wait for it, and was
-- stopped as "lease lost" by its own fence. It now reads the row FOR KEY
-- SHARE, which conflicts only with a DELETE and with an UPDATE of a key
-- column. PostgreSQL counts as key columns those of every unique index that
-- is neither partial nor on expressions; this index (redundant as a
-- constraint, job_key alone is the primary key) makes fencing_token one.
-- So:
--   takeover (lease_acquire.sql, sets fencing_token)   FOR UPDATE: waits
--     for a fenced transaction in flight, as before;
--   renewal, release, revoke (set lease_until, released_at,
--     revoke_requested_at only)                        FOR NO KEY UPDATE:
--     do not wait.
-- Renewals stay HOT updates: lease_until is in no index. A contender for a
-- live lease still waits for a fenced transaction (its upsert locks the row
-- before its WHERE finds the lease held), as it did before; so 0007's
-- delete trigger, which gives up rather than queue renewals behind such a
-- wait, still has work to do, though a renewal itself no longer waits.
create unique index job_leases_term on @schema@.job_leases (job_key, fencing_token);

-- Tokens. A NULL token passed (current > NULL is NULL), and so did any
-- token above the job's current term, which was never issued: a spoofed
-- token, or one granted by a primary whose last commits a promoted standby
-- lost. Both are refused now, the latter with SQLSTATE BF003 (postgres
-- maps it to EFENCED: the write must not land, and retrying cannot help).
--
--   22023  the job is NULL or empty, or the token is NULL or below 1
--   BF001  a term with a larger token has been granted (stale)
--   BF002  the job has no lease row
--   BF003  the token is above the job's current term (never issued)
create or replace function @schema@.fence_lease(p_job text, p_token bigint)
returns bigint
language plpgsql
as $$
declare
  current bigint;
begin
  if p_job is null or p_job = '' then
    raise exception 'baton: fence: job is empty' using errcode = '22023';
  end if;
  if p_token is null or p_token < 1 then
    raise exception 'baton: fence: token % for job % is not a fencing token (want an integer >= 1)', coalesce(p_token::text, 'NULL'), p_job
      using errcode = '22023';
  end if;
  select l.fencing_token into current from @schema@.job_leases l where l.job_key = p_job for key share;
  if current is null then
    raise exception 'baton: fence: job % has no lease', p_job using errcode = 'BF002';
  end if;
  if current > p_token then
    raise exception 'baton: fenced: write for job % with fencing token % refused: term % has been granted since', p_job, p_token, current
      using errcode = 'BF001',
            hint = 'a newer holder of the lease has taken over; this writer must stop';
  end if;
  if current < p_token then
    raise exception 'baton: fenced: write for job % with fencing token % refused: the token was never issued (the current term is %)', p_job, p_token, current
      using errcode = 'BF003',
            hint = 'the token did not come from this store''s lease; this writer must stop';
  end if;
  return current;
end
$$;
