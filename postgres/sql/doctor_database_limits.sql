-- baton doctor pg: databases with a connection limit (-1 is none).
select datname::text, datconnlimit
from pg_database
where datconnlimit >= 0 and datallowconn
order by datname
