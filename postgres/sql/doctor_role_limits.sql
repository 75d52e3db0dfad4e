-- baton doctor pg: roles with a connection limit (-1 is none), and whether
-- it binds: superusers are exempt.
select rolname::text, rolconnlimit, rolsuper
from pg_roles
where rolconnlimit >= 0 and rolcanlogin
order by rolname
