-- The ceiling of `baton bench claims`: baton's whole bookkeeping of a tick,
-- with the lease, done set-based, 100 ticks at a time in 3 commits (run by
-- pgbench from bench/claims.sh, one client per daemon). The same tables,
-- keys and token expression as baton's: what the daemon's work would cost
-- if each step were one statement for the whole batch.
-- The claim hands the keys of its ticks to the next steps in pgbench
-- variables (\gset, as arrays), so each step finds its rows by key, as the
-- daemon does; searching them by claimant walked every open tick.
\set me random(1, 2000000000)

-- 1. Claim: lock up to 100 due jobs, skipping those others hold, record
-- each one's tick claimed by this client, and advance the job (by a
-- millisecond: it stays due, and each tick instant is new).
begin;
with due as (
  select name, version, next_tick_at from baton.jobs
  where next_tick_at <= clock_timestamp() and not paused and removed_at is null
  order by next_tick_at
  limit 100
  for update skip locked),
adv as (
  update baton.jobs j set next_tick_at = due.next_tick_at + interval '1 millisecond'
  from due where j.name = due.name),
ins as (
  insert into baton.ticks (job, tick_at, version, kind, state, claimed_by, claim_until)
  select name, next_tick_at, version, 'scheduled', 'pending', 'pgb-' || :me, clock_timestamp() + interval '1 minute'
  from due
  returning job, tick_at)
select coalesce(array_agg(job), '{}') as jobs, coalesce(array_agg(tick_at), '{}') as ats from ins
\gset
commit;

-- 2. Start: take each job's lease (a new term, its token above every
-- earlier one, the floor of deleted rows and the epoch's base, as
-- postgres/sql/lease_acquire.sql does), and start the attempt of each tick
-- whose lease was granted.
begin;
with mine as (
  select job, tick_at from unnest(':jobs'::text[], ':ats'::timestamptz[]) as c(job, tick_at)),
lease as (
  insert into baton.job_leases as l
    (job_key, lease_owner, lease_until, fencing_token, owner_host, owner_pid, acquired_at, released_at)
  select job, gen_random_uuid(), clock_timestamp() + interval '1 minute',
         (select greatest(f.fencing_token, baton.token_base()) + 1 from baton.lease_token_floor f),
         'pgbench', 0, clock_timestamp(), null
  from mine
  on conflict (job_key) do update
    set lease_owner = excluded.lease_owner,
        lease_until = clock_timestamp() + interval '1 minute',
        fencing_token = greatest(l.fencing_token,
          (select greatest(f.fencing_token, baton.token_base()) from baton.lease_token_floor f)) + 1,
        owner_host = excluded.owner_host, owner_pid = excluded.owner_pid,
        acquired_at = excluded.acquired_at, released_at = null, revoke_requested_at = null
    where l.lease_until <= clock_timestamp()
  returning job_key, lease_owner, fencing_token),
started as (
  update baton.ticks t
  set state = 'running', attempts = t.attempts + 1, run_id = lease.lease_owner::text, host = 'pgbench',
      token = lease.fencing_token, started_at = clock_timestamp(), not_before = null
  from mine join lease on lease.job_key = mine.job
  where t.job = mine.job and t.tick_at = mine.tick_at
  returning t.job, t.tick_at, t.attempts, t.token, t.run_id)
insert into baton.attempts (job, tick_at, attempt, daemon, host, token, run_id, started_at)
select job, tick_at, attempts, 'pgb-' || :me, 'pgbench', token, run_id, clock_timestamp()
from started;
commit;

-- 3. Finish: record each attempt's end and its tick's outcome, and
-- release each term (its row and token stay).
begin;
with fin as (
  update baton.ticks t
  set state = 'done', outcome = 'succeeded', exit_code = 0, ended_at = clock_timestamp(), not_before = null
  from unnest(':jobs'::text[], ':ats'::timestamptz[]) as c(job, tick_at)
  where t.job = c.job and t.tick_at = c.tick_at and t.state = 'running'
  returning t.job, t.tick_at, t.run_id, t.token),
att as (
  update baton.attempts a set ended_at = clock_timestamp(), exit_code = 0, outcome = 'succeeded'
  from fin where a.job = fin.job and a.tick_at = fin.tick_at and a.run_id = fin.run_id)
update baton.job_leases l set lease_until = clock_timestamp(), released_at = clock_timestamp()
from fin
where l.job_key = fin.job and l.lease_owner::text = fin.run_id and l.fencing_token = fin.token;
commit;
