-- Finish (finish_attempt and finish_tick) for a batch of calls in one
-- statement, PostgreSQL only: each call's attempt ends, and its tick ends
-- with its one outcome (state done) or waits for a retry (pending), if the
-- call's run id is still the tick's current attempt. $5 is the attempt's
-- outcome, the tick's too when it ends. Returns the ticks it ended or left
-- for a retry.
-- "state is distinct from 'done'" (a state is never null) rather than <>:
-- the row is found by its key, not through the partial index of open
-- ticks (ticks_open), which the planner takes for small and walked whole.
with c as (
  select * from unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[],
                       $6::text[], $7::int8[], $8::text[], $9::int8[])
    as c(job, tick_at, run_id, state, outcome, reason, exit_code, output, retry_ms)),
att as (
  update @schema@.attempts a
  set ended_at = clock_timestamp(), exit_code = c.exit_code, outcome = c.outcome, reason = c.reason
  from c
  where c.run_id <> '' and a.job = c.job and a.tick_at = c.tick_at and a.run_id = c.run_id)
update @schema@.ticks t
set state = c.state, outcome = case when c.state = 'done' then c.outcome end, reason = c.reason, exit_code = c.exit_code, output = c.output,
    ended_at = case when c.state = 'done' then clock_timestamp() else t.ended_at end,
    not_before = case when c.state = 'done' then null
                      else clock_timestamp() + c.retry_ms * interval '1 millisecond' end
from c
where t.job = c.job and t.tick_at = c.tick_at and t.run_id = c.run_id and t.state is distinct from 'done'
returning t.job, t.tick_at
