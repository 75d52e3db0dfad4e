-- The events of $1 (a JSON array of ids) that claim $2 still holds by the
-- store's clock (the clock that set claim_until), with their ordering keys
-- and the milliseconds the claim has left. A read: it answers while a
-- writer holds the write lock.
select id, coalesce(ordering_key, ''), (claim_until - @now@) / 1000
  from outbox
 where id in (select value from json_each($1))
   and state = 'pending' and claim_token = $2 and claim_until > @now@
 order by id
