-- One event in the caller's transaction. The write transaction is
-- exclusive, so the head check cannot race another writer.
insert into outbox (topic, event_key, ordering_key, payload, headers, is_head, available_at)
values ($1, $2, $4, $3, $5,
        $4 is null or not exists (select 1 from outbox p
                                   where p.ordering_key = $4 and p.state in ('pending', 'dead')),
        max(@now@, coalesce($6, 0)))
on conflict (event_key) do nothing
returning id
