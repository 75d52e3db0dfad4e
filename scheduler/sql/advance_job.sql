update @schema@.jobs set next_tick_at = $2 where name = $1
