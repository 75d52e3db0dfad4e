-- The durable schedule (package scheduler). Each job's definition and its
-- next tick live here, so that any daemon can claim any job and a restart
-- never forgets a tick. Times are the database's clock.
create table @schema@.jobs (
  name         text primary key,
  version      text not null,          -- digest of the definition, defaults applied
  definition   jsonb not null,
  next_tick_at timestamptz,            -- null: the schedule has no next instant
  paused       boolean not null default false,
  paused_note  text not null default '',
  defined_by   text not null,          -- host whose job file wrote this version
  defined_at   timestamptz not null default clock_timestamp(),
  removed_at   timestamptz             -- removed from the job file; kept for its history
);
create index jobs_due on @schema@.jobs (next_tick_at)
  where not paused and removed_at is null;

-- One row per tick, created when it is claimed (or triggered, or
-- backfilled), ending in exactly one outcome. The primary key is the tick's
-- identity: a job never has two ticks at one instant.
create table @schema@.ticks (
  job         text not null,
  tick_at     timestamptz not null,
  version     text not null,
  kind        text not null,           -- scheduled, manual, backfill
  state       text not null,           -- pending, queued, running, done
  outcome     text,                    -- set with state done
  reason      text not null default '',
  attempts    integer not null default 0,
  not_before  timestamptz,             -- a retry waits until then
  claimed_by  text not null default '',-- daemon id
  claim_until timestamptz not null,    -- renewed by the claiming daemon; then anyone may take over
  host        text not null default '',
  token       bigint not null default 0,
  run_id      text not null default '',
  started_at  timestamptz,
  ended_at    timestamptz,
  exit_code   integer,
  output      text not null default '',
  created_at  timestamptz not null default clock_timestamp(),
  primary key (job, tick_at)
);
create index ticks_open on @schema@.ticks (claim_until) where state <> 'done';

-- Each attempt of a tick (retries, takeovers).
create table @schema@.attempts (
  job        text not null,
  tick_at    timestamptz not null,
  attempt    integer not null,
  daemon     text not null,
  host       text not null,
  token      bigint not null,
  run_id     text not null,
  started_at timestamptz not null,
  ended_at   timestamptz,
  exit_code  integer,
  outcome    text,
  reason     text not null default '',
  primary key (job, tick_at, attempt),
  foreign key (job, tick_at) references @schema@.ticks on delete cascade
);

-- Running daemons and the job versions their files hold, for drift reports.
create table @schema@.daemons (
  id         text primary key,
  host       text not null,
  pid        integer not null,
  config     text not null,
  versions   jsonb not null,           -- {job: version} of the daemon's file
  started_at timestamptz not null,
  seen_at    timestamptz not null
);

-- A replace overlap asks the running term to end: its holder's next renewal
-- fails, its tree is stopped, and it releases the lease.
alter table @schema@.job_leases add column revoke_requested_at timestamptz;
