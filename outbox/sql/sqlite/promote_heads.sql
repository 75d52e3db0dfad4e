-- The first open event of each ordering key of the events $1 (JSON array
-- of ids) becomes its key's head.
update outbox set is_head = 1
 where id in (select min(p.id) from outbox p
               where p.ordering_key in (select s.ordering_key from outbox s
                                         where s.id in (select value from json_each($1))
                                           and s.ordering_key is not null)
                 and p.state in ('pending', 'dead')
               group by p.ordering_key)
   and not is_head
