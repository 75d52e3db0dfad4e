select state from @schema@.outbox where id = $1
