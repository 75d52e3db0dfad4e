-- One event's payload, cut to its first $2 characters, with its whole
-- length, and its headers.
select substr(cast(payload as text), 1, $2), length(cast(payload as text)), coalesce(cast(headers as text), '{}')
  from @schema@.outbox where id = $1
