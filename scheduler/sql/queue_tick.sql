-- queue-one: this tick waits for the lease unless another already does.
update @schema@.ticks set state = 'queued'
where job = $1 and tick_at = $2 and run_id = $3 and state = 'pending'
  and not exists (select 1 from @schema@.ticks q
                  where q.job = $1 and q.state = 'queued' and q.tick_at <> $2)
