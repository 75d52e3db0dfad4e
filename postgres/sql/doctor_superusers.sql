-- baton doctor pg: who may use superuser_reserved_connections.
select rolname::text from pg_roles where rolsuper and rolcanlogin order by rolname
