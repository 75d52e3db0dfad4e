-- Insert the lease, or take over one that has expired by the database's clock,
-- bumping the fencing token. No row comes back when the lease is held.
-- A new row starts above the schema's floor, the highest token of any lease
-- row deleted (0007_lease_token_floor), so tokens never go back; and every
-- token is above the epoch's base (0011_token_epoch), so they do not go back
-- across a failover that lost the last acquisitions either.
insert into @schema@.job_leases as l
  (job_key, lease_owner, lease_until, fencing_token,
   owner_host, owner_pid, owner_argv, owner_started_at, acquired_at, released_at)
values ($1, $2, clock_timestamp() + $3 * interval '1 millisecond',
   (select greatest(f.fencing_token, @schema@.token_base()) + 1 from @schema@.lease_token_floor f),
   $4, $5, $6, $7, clock_timestamp(), null)
on conflict (job_key) do update
  set lease_owner = excluded.lease_owner,
      -- now, not when the statement started: it may have waited for a
      -- transaction that held the row (a fenced write of the old term)
      lease_until = clock_timestamp() + $3 * interval '1 millisecond',
      fencing_token = greatest(l.fencing_token, @schema@.token_base()) + 1,
      owner_host = excluded.owner_host,
      owner_pid = excluded.owner_pid,
      owner_argv = excluded.owner_argv,
      owner_started_at = excluded.owner_started_at,
      acquired_at = excluded.acquired_at,
      released_at = null,
      revoke_requested_at = null
  where l.lease_until <= clock_timestamp()
returning fencing_token, lease_until
