-- The first open event of each ordering key of the events $1 (JSON array
-- of ids) becomes its key's head: one index probe per key.
update outbox set is_head = 1
 where id in (select (select p.id from outbox p
                       where p.ordering_key = k.ordering_key and p.state in ('pending', 'dead')
                       order by p.id limit 1)
                from (select distinct s.ordering_key from outbox s
                       where s.id in (select value from json_each($1))
                         and s.ordering_key is not null) k)
   and not is_head
