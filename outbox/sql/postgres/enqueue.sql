-- One event in the caller's transaction: the same function shell jobs call.
select @schema@.enqueue($1, $2, $3::jsonb, $4, $5::jsonb, $6)
