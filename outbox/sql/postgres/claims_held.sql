-- The events of $1 (a JSON array of ids) that claim $2 still holds by the
-- store's clock (the clock that set claim_until), with their ordering keys
-- and the milliseconds the claim has left.
select o.id, coalesce(o.ordering_key, ''),
       (extract(epoch from o.claim_until - @now@) * 1000)::bigint
  from @schema@.outbox o
 where o.id = any(array(select jsonb_array_elements_text($1::jsonb)::bigint))
   and o.state = 'pending' and o.claim_token = $2::uuid and o.claim_until > @now@
 order by o.id
