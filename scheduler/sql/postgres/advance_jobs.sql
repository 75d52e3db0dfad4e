-- advance_job.sql for all the jobs of a claim in one statement ($1 the
-- names, $2 their next ticks); the claim holds their rows locked.
update @schema@.jobs j set next_tick_at = c.next_tick_at
from unnest($1::text[], $2::timestamptz[]) as c(name, next_tick_at)
where j.name = c.name
