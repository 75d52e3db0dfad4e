-- Relays seen within the last $1 ms count as active; older rows (a relay
-- that died) are listed as stale until prune_relays removes them.
select id, host, pid, sink, topics, started_at, seen_at, delivered, failed,
       seen_at > @before($1)@, version
  from @schema@.outbox_relays
 order by started_at
