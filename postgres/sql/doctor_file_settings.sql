-- baton doctor pg: the server's configuration-file values, for settings that
-- a database or role setting shadows in the doctor's own session. Readable by
-- superusers only.
select distinct on (name) name, setting
from pg_file_settings
where name = any($1::text[]) and applied
order by name, seqno desc
