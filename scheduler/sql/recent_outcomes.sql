-- The outcomes of a job's ended ticks before an instant, newest first,
-- skips left out: what a notification's rule counts failures in a row by.
select outcome from @schema@.ticks
where job = $1 and tick_at < $2 and state = 'done'
  and outcome not in ('skipped-overlap', 'skipped-missed')
order by tick_at desc
limit $3
