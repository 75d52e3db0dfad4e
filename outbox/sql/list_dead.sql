-- Dead events, oldest first, with how many events of their ordering key
-- wait behind them.
select d.id, d.topic, d.event_key, coalesce(d.ordering_key, ''), d.attempts, coalesce(d.last_error, ''),
       d.created_at, d.available_at,
       (select count(*) from @schema@.outbox p
         where d.ordering_key is not null and p.ordering_key = d.ordering_key and p.state = 'pending')
  from @schema@.outbox d
 where d.state = 'dead'
 order by d.id
 limit $1
