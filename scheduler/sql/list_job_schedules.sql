-- Every job as list_jobs reads it, but of its definition only what judges
-- its schedule (the schedule, time zone, DST policy and jitter) instead of
-- the whole document: status, the dashboard's overview and /metrics read
-- every job, and sending and decoding 10,000 definitions was most of
-- their time. host is a host-scoped job's instance's host ('' otherwise). The same operators in both dialects (SQLite 3.38 and
-- later).
select j.name, j.version,
       j.definition->>'schedule', j.definition->>'timezone',
       j.definition->'dst'->>'gap', j.definition->'dst'->>'repeat', j.definition->>'jitter', j.host,
       j.next_tick_at, j.paused, j.paused_note,
       j.defined_by, j.defined_at,
       l.outcome, l.tick_at, l.succeeded_at,
       case when j.min_level_version = j.version then j.min_level else 0 end
from @schema@.jobs j
left join @schema@.last_ticks l on l.job = j.name
where j.removed_at is null
order by j.name
