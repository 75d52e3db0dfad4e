-- Insert the lease, or take over one that has expired by the database's clock,
-- bumping the fencing token. No row comes back when the lease is held.
--
-- A new row starts above the schema's floor, the highest token of any lease
-- row deleted (0007_lease_token_floor), so tokens never go back; and every
-- token is above the epoch's base, epoch << 32 (0011_token_epoch), so they do
-- not go back across a failover that lost the last acquisitions either.
--
-- The holders of those lost acquisitions still run until a renewal fails. So
-- for one TTL (this request's) after an acquisition first sees a new epoch,
-- no lease is granted: the row that comes back then has no token, and when
-- the hold ends (held_back_until). The first to see the epoch records it.
with e as (
  select ('x' || left(pg_walfile_name(pg_current_wal_lsn()), 8))::bit(32)::bigint - 1 + t.epoch_offset as epoch,
         t.epoch_seen, t.epoch_seen_at
    from @schema@.token_epoch t
), seen as (
  update @schema@.token_epoch t
     set epoch_seen = e.epoch, epoch_seen_at = clock_timestamp()
    from e
   where e.epoch > t.epoch_seen
), hold as (
  select e.epoch << 32 as base,
         case when e.epoch > e.epoch_seen then clock_timestamp() else e.epoch_seen_at end
           + $3 * interval '1 millisecond' as until
    from e
), granted as (
  insert into @schema@.job_leases as l
    (job_key, lease_owner, lease_until, fencing_token,
     owner_host, owner_pid, owner_argv, owner_started_at, acquired_at, released_at)
  select $1, $2, clock_timestamp() + $3 * interval '1 millisecond',
     greatest(f.fencing_token, h.base) + 1,
     $4, $5, $6, $7, clock_timestamp(), null
    from @schema@.lease_token_floor f, hold h
   where h.until <= clock_timestamp()
  on conflict (job_key) do update
    set lease_owner = excluded.lease_owner,
        -- now, not when the statement started: it may have waited for a
        -- transaction that held the row (a fenced write of the old term)
        lease_until = clock_timestamp() + $3 * interval '1 millisecond',
        fencing_token = greatest(l.fencing_token, (select h2.base from hold h2)) + 1,
        owner_host = excluded.owner_host,
        owner_pid = excluded.owner_pid,
        owner_argv = excluded.owner_argv,
        owner_started_at = excluded.owner_started_at,
        acquired_at = excluded.acquired_at,
        released_at = null,
        revoke_requested_at = null
    where l.lease_until <= clock_timestamp()
  returning fencing_token, lease_until
)
select fencing_token, lease_until, null::timestamptz as held_back_until from granted
union all
select null, null, h.until from hold h where h.until > clock_timestamp()
