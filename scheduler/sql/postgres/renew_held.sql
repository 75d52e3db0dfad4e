-- Extend the claims of the open ticks that daemon $1 is working on ($3 the
-- jobs, $4 the ticks' instants), in one statement: renew_tick.sql for each.
-- "state is distinct from 'done'" (a state is never null) rather than <>:
-- the row is found by its key, not through the partial index of open
-- ticks (ticks_open), which the planner takes for small and walked whole.
update @schema@.ticks t set claim_until = @after($2)@
from unnest($3::text[], $4::timestamptz[]) as c(job, tick_at)
where t.claimed_by = $1 and t.state is distinct from 'done' and t.job = c.job and t.tick_at = c.tick_at
