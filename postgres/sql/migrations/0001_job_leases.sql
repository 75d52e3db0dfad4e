-- The lease of each job: one row per job, kept forever once created, so that
-- fencing tokens never go back (a released lease keeps its row and token).
create table @schema@.job_leases (
  job_key          text primary key,
  lease_owner      uuid not null,
  lease_until      timestamptz not null,
  fencing_token    bigint not null,
  -- who holds it, for `baton leases` and busy messages; not part of the protocol
  owner_host       text not null default '',
  owner_pid        integer not null default 0,
  owner_argv       text[] not null default '{}',
  owner_started_at timestamptz,
  acquired_at      timestamptz not null default clock_timestamp(),
  released_at      timestamptz
);
