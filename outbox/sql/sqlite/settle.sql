-- End events (delivered or skipped); promote_heads follows in the same
-- transaction. $1 is a JSON array of ids; $2 the claim (null: any).
update outbox
   set state = $3, done_at = @now@, claim_token = null, claim_until = null
 where id in (select value from json_each($1)) and state in ('pending', 'dead')
   and ($2 is null or claim_token = $2)
returning id
