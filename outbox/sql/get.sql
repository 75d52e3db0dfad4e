select id, topic, event_key, coalesce(ordering_key, ''), state, attempts, coalesce(last_error, ''),
       created_at, done_at, available_at, is_head
  from @schema@.outbox where id = $1
