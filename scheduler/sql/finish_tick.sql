-- End a tick with its one outcome, or (state pending) leave it for a retry
-- after not_before. Only the attempt that is the tick's current one may.
-- "state is distinct from 'done'" (a state is never null) rather than <>:
-- the row is found by its key, not through the partial index of open
-- ticks (ticks_open), which the planner takes for small and walked whole.
update @schema@.ticks
set state = $4, outcome = $5, reason = $6, exit_code = $7, output = $8,
    ended_at = case when cast($4 as text) = 'done' then @now@ else ended_at end,
    not_before = case when cast($4 as text) = 'done' then null else @after($9)@ end
where job = $1 and tick_at = $2 and run_id = $3 and state is distinct from 'done'
