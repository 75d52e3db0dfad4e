-- Idempotency keys (package idempotency): one row per key and scope. Do
-- writes the row in the transaction of the business write, so it is never
-- seen in flight; Steps commits it first, as a lease with a fencing token,
-- and records a recovery point with each step. Times are the database's clock.
create table @schema@.idempotency_keys (
  scope           text not null,            -- e.g. client + method + route
  key             text not null,
  fingerprint     text not null,            -- digest of the request the key was first used with
  state           text not null check (state in ('in_flight', 'complete')),
  recovery_point  text not null default 'started', -- the last step committed (Steps)
  data            jsonb,                    -- what the steps saved for later steps
  token           bigint not null default 0,-- the lease's term (Steps); only grows
  lease_until     timestamptz,              -- in flight until then (Steps)
  response_status integer,                  -- the stored response, once complete
  response_header jsonb,
  response_body   bytea,
  created_at      timestamptz not null default clock_timestamp(),
  updated_at      timestamptz not null default clock_timestamp(),
  expires_at      timestamptz,              -- set at completion: prunable after
  primary key (scope, key)
);
create index idempotency_keys_expiry on @schema@.idempotency_keys (expires_at)
  where state = 'complete';
