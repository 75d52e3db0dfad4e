-- The event a key names already: Enqueue compares it with the new one.
select id, topic, coalesce(ordering_key, ''), payload from outbox where event_key = $1
