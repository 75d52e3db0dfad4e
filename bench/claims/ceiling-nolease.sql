-- The ceiling of `baton bench claims` without the lease: baton's whole
-- bookkeeping of a tick but the lease, done set-based, 100 ticks at a time
-- in 3 commits (run by pgbench from bench/claims.sh, one client per
-- daemon), on baton's own tables: what the daemon's work would cost if
-- each step were one statement for the whole batch.
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

-- 2. Start the attempt of each claimed tick.
begin;
with started as (
  update baton.ticks t
  set state = 'running', attempts = t.attempts + 1, run_id = gen_random_uuid()::text, host = 'pgbench',
      token = 1, started_at = clock_timestamp(), not_before = null
  from unnest(':jobs'::text[], ':ats'::timestamptz[]) as c(job, tick_at)
  where t.job = c.job and t.tick_at = c.tick_at and t.state = 'pending'
  returning t.job, t.tick_at, t.attempts, t.token, t.run_id)
insert into baton.attempts (job, tick_at, attempt, daemon, host, token, run_id, started_at)
select job, tick_at, attempts, 'pgb-' || :me, 'pgbench', token, run_id, clock_timestamp()
from started;
commit;

-- 3. Finish: record each attempt's end and its tick's outcome.
begin;
with fin as (
  update baton.ticks t
  set state = 'done', outcome = 'succeeded', exit_code = 0, ended_at = clock_timestamp(), not_before = null
  from unnest(':jobs'::text[], ':ats'::timestamptz[]) as c(job, tick_at)
  where t.job = c.job and t.tick_at = c.tick_at and t.state = 'running'
  returning t.job, t.tick_at, t.run_id, t.token)
update baton.attempts a set ended_at = clock_timestamp(), exit_code = 0, outcome = 'succeeded'
from fin where a.job = fin.job and a.tick_at = fin.tick_at and a.run_id = fin.run_id;
commit;
