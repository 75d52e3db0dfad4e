-- Is anything deliverable now, or being delivered? A pending head whose
-- time has come, claimed or not (a lapsed claim makes it claimable again).
-- Events waiting for their not-before time or their next attempt, and
-- those behind a dead head (parked: they wait for an operator), do not
-- count.
select count(*) from (
  select 1 from @schema@.outbox
   where state = 'pending' and is_head and available_at <= @now@
   limit 1) x
