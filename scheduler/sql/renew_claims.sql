update @schema@.ticks set claim_until = @after($2)@
where claimed_by = $1 and state <> 'done'
