-- Delete a small batch of a job's ended ticks that are past its history:
-- older than the cutoff, or beyond the newest $3 + 1.
delete from @schema@.ticks
where (job, tick_at) in (
  select job, tick_at from @schema@.ticks t
  where t.job = $1 and t.state = 'done'
    and (t.tick_at < $2
         or t.tick_at < (select k.tick_at from @schema@.ticks k where k.job = $1
                         order by k.tick_at desc limit 1 offset $3))
  limit $4)
