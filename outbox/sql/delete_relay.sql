delete from @schema@.outbox_relays where id = $1
