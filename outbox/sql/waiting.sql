-- What is left when nothing is deliverable now: the pending events not
-- parked behind a dead one, the earliest time one of their heads comes
-- due, and the dead events.
select (select count(*) from @schema@.outbox p
         where p.state = 'pending'
           and (p.ordering_key is null
                or not exists (select 1 from @schema@.outbox d
                                where d.ordering_key = p.ordering_key and d.state = 'dead'))),
       (select min(h.available_at) from @schema@.outbox h where h.state = 'pending' and h.is_head),
       (select count(*) from @schema@.outbox d where d.state = 'dead')
