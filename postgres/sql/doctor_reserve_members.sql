-- baton doctor pg, PostgreSQL 16+: the login roles, superusers aside, that
-- may use reserved_connections: those with the privileges of
-- pg_use_reserved_connections, directly or through membership
-- (pg_auth_members), as the server checks it.
select rolname::text
from pg_roles
where rolcanlogin and not rolsuper
  and pg_has_role(oid, 'pg_use_reserved_connections', 'USAGE')
order by rolname
