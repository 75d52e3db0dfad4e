select id from outbox where event_key = $1
