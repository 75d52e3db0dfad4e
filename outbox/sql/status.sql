-- Backlog per topic: pending and dead events, and the oldest pending.
select topic,
       sum(case when state = 'pending' then 1 else 0 end),
       sum(case when state = 'dead' then 1 else 0 end),
       min(case when state = 'pending' then created_at end)
  from @schema@.outbox
 where state in ('pending', 'dead')
 group by topic
 order by topic
