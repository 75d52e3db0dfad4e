-- Extend the claim of one open tick that daemon $1 is working on (see
-- postgres/renew_held.sql, the same for many in one statement).
update @schema@.ticks set claim_until = @after($2)@
where claimed_by = $1 and state <> 'done' and job = $3 and tick_at = $4
