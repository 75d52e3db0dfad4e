-- Due jobs, oldest first, locked until the claiming transaction commits;
-- jobs another daemon is claiming are skipped, not waited for, and so are
-- jobs whose definition needs a higher feature level than the claiming
-- daemon's ($3): they wait for a daemon that runs them as they mean. A
-- level recorded for an earlier version of the definition does not count.
select name, version, definition, next_tick_at,
       case when min_level_version = version then min_level else 0 end
from @schema@.jobs
where next_tick_at <= $1 and not paused and removed_at is null
  and (min_level <= $3 or min_level_version <> version)
order by next_tick_at
limit $2
@skip_locked@
