-- Due jobs, oldest first, locked until the claiming transaction commits;
-- jobs another daemon is claiming are skipped, not waited for.
select name, version, definition, next_tick_at
from @schema@.jobs
where next_tick_at <= $1 and not paused and removed_at is null
order by next_tick_at
limit $2
@skip_locked@
