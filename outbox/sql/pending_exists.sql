-- Is anything still to deliver, claimed or not, in backoff or not? Events
-- parked behind a dead event of their ordering key do not count: they wait
-- for an operator.
select count(*) from (
  select 1 from @schema@.outbox p
   where p.state = 'pending'
     and (p.ordering_key is null
          or not exists (select 1 from @schema@.outbox d
                          where d.ordering_key = p.ordering_key and d.state = 'dead'))
   limit 1) x
