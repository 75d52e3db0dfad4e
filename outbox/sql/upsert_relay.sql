insert into @schema@.outbox_relays (id, host, pid, sink, topics, delivered, failed)
values ($1, $2, $3, $4, $5, $6, $7)
on conflict (id) do update
   set seen_at = @now@, delivered = excluded.delivered, failed = excluded.failed
