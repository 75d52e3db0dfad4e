-- The set-based ceiling's jobs (bench/claims.sh): :jobs jobs in baton's own
-- schema, all due (a day ago), as `baton bench claims` makes its own.
insert into baton.jobs (name, version, definition, next_tick_at, defined_by)
select format('pgb-%s', i), 'v1', '{}', clock_timestamp() - interval '1 day', 'pgbench'
from generate_series(1, :jobs) i;
