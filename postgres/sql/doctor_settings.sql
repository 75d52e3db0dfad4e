-- baton doctor pg: the timeouts that matter to pools, as this session sees
-- them. A setting this version lacks (transaction_timeout before 17) has no
-- row. source tells whether the value is the server's or one of a database
-- or role setting (or the client's) that shadows it in this session.
select name, setting, coalesce(unit, ''), source, boot_val
from pg_settings
where name = any($1::text[])
order by name
