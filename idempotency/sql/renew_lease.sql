-- Extend the current term's lease; no row: the term is over.
update @schema@.idempotency_keys
set lease_until = @after($4)@, updated_at = @now@
where scope = $1 and key = $2 and token = $3 and state = 'in_flight'
