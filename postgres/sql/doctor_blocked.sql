-- baton doctor pg: who waits on whom. pg_blocking_pids is not free, so it
-- is asked only of sessions waiting on a lock.
select blocker, array_agg(a.pid order by a.pid)
from pg_stat_activity a, unnest(pg_blocking_pids(a.pid)) as blocker
where a.wait_event_type = 'Lock'
group by blocker
