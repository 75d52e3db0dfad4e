-- Extend the claim of one open tick that daemon $1 is working on (see
-- postgres/renew_held.sql, the same for many in one statement).
-- "state is distinct from 'done'" (a state is never null) rather than <>:
-- the row is found by its key, not through the partial index of open
-- ticks (ticks_open), which the planner takes for small and walked whole.
update @schema@.ticks set claim_until = @after($2)@
where claimed_by = $1 and state is distinct from 'done' and job = $3 and tick_at = $4
