-- start_attempt.sql and insert_attempt.sql for a batch of starts in one
-- statement, after lock_jobs.sql has locked their jobs' rows in this
-- transaction: per call, its tick ($1, $2), the current attempt it
-- expects ($3), its run id, host, token and daemon ($4-$7), and whether it
-- keeps the schedule's order ($8, a scheduled tick: later_start.sql must
-- find no later scheduled tick started). The ticks are distinct. Returns, per
-- call (its index in the arrays, from 1), the attempt started, or the
-- later tick that overtook it; neither when another attempt or an outcome
-- came first.
-- "state is distinct from 'done'" (a state is never null) rather than <>:
-- the row is found by its key, not through the partial index of open
-- ticks (ticks_open), which the planner takes for small and walked whole.
with c as (
  select * from unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::int8[], $7::text[], $8::bool[])
    with ordinality as c(job, tick_at, prev, run_id, host, token, daemon, in_order, i)
), later as (
  select c.i, (select l.tick_at from @schema@.ticks l
                where l.job = c.job and l.tick_at > c.tick_at and l.kind = 'scheduled' and l.attempts > 0
                order by l.tick_at limit 1) as later
  from c where c.in_order
), started as (
  update @schema@.ticks t
  set state = 'running', attempts = t.attempts + 1, run_id = c.run_id, host = c.host,
      token = c.token, started_at = @now@, not_before = null
  from c left join later l on l.i = c.i
  where t.job = c.job and t.tick_at = c.tick_at and t.run_id = c.prev and t.state is distinct from 'done'
    and l.later is null
  returning c.i, t.attempts
), recorded as (
  insert into @schema@.attempts (job, tick_at, attempt, daemon, host, token, run_id, started_at)
  select c.job, c.tick_at, s.attempts, c.daemon, c.host, c.token, c.run_id, @now@
  from started s join c on c.i = s.i
)
select c.i, s.attempts, l.later
from c left join started s on s.i = c.i left join later l on l.i = c.i
