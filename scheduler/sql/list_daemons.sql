-- Daemons seen within the last $1 milliseconds.
select id, host, pid, config, versions, started_at, seen_at, version, feature_level
from @schema@.daemons
where seen_at >= @before($1)@
order by host, id
