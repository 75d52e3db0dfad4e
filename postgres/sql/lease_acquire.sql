-- Insert each lease, or take over one that has expired by the database's
-- clock, bumping the fencing token. One statement for any number of jobs
-- (Acquire passes one, AcquireAll a batch of distinct jobs): $1 the job
-- keys, and per job its owner ($2), TTL in milliseconds ($3), host ($4), pid
-- ($5), argv as a JSON array ($6) and start ($7). A job granted comes back
-- with its token; a job whose lease is held does not come back.
--
-- A new term's token is above every token that may have been issued for its
-- job: greatest(its row's token, the floor, the epoch's base) + 1. The floor
-- is the highest token of any lease row deleted (0007_lease_token_floor):
-- the job's row may have been deleted and made again lower, by a baton from
-- before the floor. The base is epoch << 32 (0011_token_epoch), so tokens do
-- not go back across a failover that lost the last acquisitions either. The
-- lease table refuses any other token (0014_lease_token_rises).
--
-- The holders of those lost acquisitions still run until a renewal fails. So
-- for one TTL (each request's) after an acquisition first sees a new epoch,
-- no lease is granted: the row that comes back then has no token, and when
-- the hold ends (held_back_until). The first to see the epoch records it.
--
-- Rows are taken in order of job key, so that two batches wait for each
-- other's rows in one order, never in a cycle.
with c as (
  select * from unnest($1::text[], $2::uuid[], $3::int8[], $4::text[], $5::int4[], $6::text[], $7::timestamptz[])
    as c(job_key, owner, ttl_ms, host, pid, argv, started_at)
), e as (
  select ('x' || left(pg_walfile_name(pg_current_wal_lsn()), 8))::bit(32)::bigint - 1 + t.epoch_offset as epoch,
         t.epoch_seen, t.epoch_seen_at, f.fencing_token as floor
    from @schema@.token_epoch t, @schema@.lease_token_floor f
   limit 1 -- their only rows; said, so that the planner does not expect many
), seen as (
  update @schema@.token_epoch t
     set epoch_seen = e.epoch, epoch_seen_at = clock_timestamp()
    from e
   where e.epoch > t.epoch_seen
), hold as (
  -- base: the highest token issued for any job, its own row aside
  select c.*, greatest(e.floor, e.epoch << 32) as base,
         case when e.epoch > e.epoch_seen then clock_timestamp() else e.epoch_seen_at end
           + c.ttl_ms * interval '1 millisecond' as until
    from c, e
), granted as (
  insert into @schema@.job_leases as l
    (job_key, lease_owner, lease_until, fencing_token,
     owner_host, owner_pid, owner_argv, owner_started_at, acquired_at, released_at)
  select h.job_key, h.owner, clock_timestamp() + h.ttl_ms * interval '1 millisecond',
     h.base + 1,
     h.host, h.pid, array(select jsonb_array_elements_text(h.argv::jsonb)), h.started_at, clock_timestamp(), null
    from hold h
   where h.until <= clock_timestamp()
   order by h.job_key
  on conflict (job_key) do update
    set lease_owner = excluded.lease_owner,
        -- now, not when the statement started: it may have waited for a
        -- transaction that held the row (a fenced write of the old term)
        lease_until = clock_timestamp()
          + (select h3.ttl_ms from hold h3 where h3.job_key = excluded.job_key) * interval '1 millisecond',
        fencing_token = greatest(l.fencing_token, (select h2.base from hold h2 limit 1)) + 1,
        owner_host = excluded.owner_host,
        owner_pid = excluded.owner_pid,
        owner_argv = excluded.owner_argv,
        owner_started_at = excluded.owner_started_at,
        acquired_at = excluded.acquired_at,
        released_at = null,
        revoke_requested_at = null
    where l.lease_until <= clock_timestamp()
  returning job_key, fencing_token, lease_until
)
select job_key, fencing_token, lease_until, null::timestamptz as held_back_until from granted
union all
select h.job_key, null, null, h.until from hold h where h.until > clock_timestamp()
