-- Every job's next tick (benchmarks: make all jobs due at once).
update @schema@.jobs set next_tick_at = $1 where removed_at is null
