-- Claim up to $4 deliverable heads, oldest first (the write transaction is
-- exclusive). $5 is a JSON array of topics ('[]': all).
update outbox
   set claim_token = $1, claim_until = @after($2)@, claimed_by = $3, attempts = attempts + 1
 where id in (
   select c.id from outbox c
    where c.state = 'pending' and c.is_head and c.available_at <= @now@
      and (c.claim_until is null or c.claim_until <= @now@)
      and ($5 = '[]' or c.topic in (select value from json_each($5)))
    order by c.id
    limit $4)
returning id, topic, event_key, ordering_key, payload, headers, created_at, attempts
