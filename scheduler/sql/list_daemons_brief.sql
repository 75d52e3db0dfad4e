-- Daemons seen within the last $1 milliseconds, as list_daemons reads them
-- but without their files' versions (a document of every job's version
-- each): status and the dashboard read the drift instead (drift.sql).
select id, host, pid, config, started_at, seen_at, version, feature_level
from @schema@.daemons
where seen_at >= @before($1)@
order by host, id
