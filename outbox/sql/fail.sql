-- A delivery failed: back to pending after a backoff of $4 ms, or dead
-- ($3 = 'dead'), which parks the event's ordering key. Only the claim's
-- holder may say so.
update @schema@.outbox
   set state = $3, claim_token = null, claim_until = null,
       available_at = @after($4)@, last_error = $5
 where id = $1 and claim_token = $2 and state = 'pending'
