-- baton doctor pg: the server, the doctor's own session and the connection
-- budget. current_setting(name, true) is NULL for a setting this version
-- lacks (reserved_connections before PostgreSQL 16).
select current_setting('server_version_num')::int,
       current_setting('server_version'),
       (select system_identifier::text from pg_control_system()),
       current_user::text,
       current_database()::text,
       pg_backend_pid(),
       coalesce((select rolsuper from pg_roles where rolname = current_user), false),
       pg_has_role(current_user, 'pg_read_all_stats', 'USAGE'),
       current_setting('max_connections')::int,
       current_setting('superuser_reserved_connections')::int,
       current_setting('reserved_connections', true)::int
