-- baton doctor pg: the sessions that hold connection slots. Client
-- backends are what max_connections counts. For other roles' sessions a
-- role without pg_read_all_stats sees the pid, user, database and
-- application only (backend_type, state, client address, times and query
-- are NULL or '<insufficient privilege>'); such a row with a user and a
-- database is taken to be a client backend and reported as hidden. The
-- doctor's own session is left out: it reports what it found, not itself.
select pid,
       coalesce(usename::text, ''),
       coalesce(datname::text, ''),
       coalesce(application_name, ''),
       coalesce(host(client_addr), ''),
       coalesce(state, ''),
       backend_type is null as hidden,
       extract(epoch from now() - state_change)::float8,
       extract(epoch from now() - xact_start)::float8,
       age(backend_xmin)::bigint,
       coalesce(left(query, 200), '')
from pg_stat_activity
where (backend_type = 'client backend'
       or (backend_type is null and usesysid is not null and datid is not null))
  and pid <> pg_backend_pid()
order by pid
