-- version ($8) is the baton that runs the relay, as 'baton version' prints it.
insert into @schema@.outbox_relays (id, host, pid, sink, topics, delivered, failed, version)
values ($1, $2, $3, $4, $5, $6, $7, $8)
on conflict (id) do update
   set seen_at = @now@, delivered = excluded.delivered, failed = excluded.failed,
       version = excluded.version
