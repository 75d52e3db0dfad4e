-- Start an attempt, compare-and-set on the previous attempt's run id: of two
-- daemons that both think they own the tick, one wins.
-- "state is distinct from 'done'" (a state is never null) rather than <>:
-- the row is found by its key, not through the partial index of open
-- ticks (ticks_open), which the planner takes for small and walked whole.
update @schema@.ticks
set state = 'running', attempts = attempts + 1, run_id = $4, host = $5,
    token = $6, started_at = @now@, not_before = null
where job = $1 and tick_at = $2 and run_id = $3 and state is distinct from 'done'
returning attempts
