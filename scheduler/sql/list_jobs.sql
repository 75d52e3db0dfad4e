-- Every job with its last ended tick and its last success. Each subquery
-- is one probe of an index however long the job's history: the primary
-- key's newest ended tick, and ticks_succeeded's newest ended_at (before
-- it, the last success scanned all of a job's ticks).
select j.name, j.version, j.definition, j.next_tick_at, j.paused, j.paused_note,
       j.defined_by, j.defined_at,
       (select t.outcome from @schema@.ticks t
         where t.job = j.name and t.state = 'done' order by t.tick_at desc limit 1),
       (select t.tick_at from @schema@.ticks t
         where t.job = j.name and t.state = 'done' order by t.tick_at desc limit 1),
       (select max(t.ended_at) from @schema@.ticks t
         where t.job = j.name and t.outcome = 'succeeded'),
       case when j.min_level_version = j.version then j.min_level else 0 end
from @schema@.jobs j
where j.removed_at is null
order by j.name
