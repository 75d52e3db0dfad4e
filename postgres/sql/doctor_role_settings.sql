-- baton doctor pg: per-database, per-role and per-database-and-role settings
-- (ALTER DATABASE/ROLE … SET) of the timeouts that matter to pools.
select coalesce(d.datname::text, ''), coalesce(r.rolname::text, ''),
       split_part(c, '=', 1), substr(c, strpos(c, '=') + 1)
from pg_db_role_setting s
left join pg_database d on d.oid = s.setdatabase
left join pg_roles r on r.oid = s.setrole
cross join unnest(s.setconfig) as c
where split_part(c, '=', 1) = any($1::text[])
order by 1, 2, 3
