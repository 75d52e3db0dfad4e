-- Remove up to $2 events delivered or skipped before $1: a small batch, a
-- short transaction.
delete from @schema@.outbox
 where id in (select id from @schema@.outbox
               where state in ('delivered', 'skipped') and done_at < $1
               order by done_at
               limit $2)
