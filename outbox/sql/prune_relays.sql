delete from @schema@.outbox_relays where seen_at < @before($1)@
