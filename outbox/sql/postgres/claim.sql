-- Claim up to $4 deliverable heads, oldest first, skipping rows another
-- relay is claiming right now. $5 is a JSON array of topics ('[]': all).
update @schema@.outbox o
   set claim_token = $1::uuid, claim_until = @after($2)@, claimed_by = $3, attempts = o.attempts + 1
 where o.id in (
   select c.id from @schema@.outbox c
    where c.state = 'pending' and c.is_head and c.available_at <= @now@
      and (c.claim_until is null or c.claim_until <= @now@)
      and ($5 = '[]' or c.topic in (select jsonb_array_elements_text($5::jsonb)))
    order by c.id
    limit $4
    @skip_locked@)
returning o.id, o.topic, o.event_key, o.ordering_key, o.payload::text, o.headers::text, o.created_at, o.attempts
