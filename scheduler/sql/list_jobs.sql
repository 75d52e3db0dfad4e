-- Every job with its last ended tick and its last success, from the job's
-- row of last_ticks (kept by a trigger on the ticks; see postgres's
-- 0013_last_ticks): one pass over the jobs, not probes of the ticks a job.
select j.name, j.version, j.definition, j.next_tick_at, j.paused, j.paused_note,
       j.defined_by, j.defined_at,
       l.outcome, l.tick_at, l.succeeded_at,
       case when j.min_level_version = j.version then j.min_level else 0 end
from @schema@.jobs j
left join @schema@.last_ticks l on l.job = j.name
where j.removed_at is null
order by j.name
