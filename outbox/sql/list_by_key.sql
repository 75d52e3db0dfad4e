-- The events whose key starts with $1, newest first. The prefix is compared
-- as a string: no LIKE, whose wildcards a key may hold.
select id, topic, event_key, coalesce(ordering_key, ''), state, attempts, coalesce(last_error, ''),
       created_at, done_at, available_at, is_head
  from @schema@.outbox
 where substr(event_key, 1, length(cast($1 as text))) = cast($1 as text)
 order by id desc
 limit $2
