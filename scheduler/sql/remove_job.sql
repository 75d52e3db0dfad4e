update @schema@.jobs set removed_at = @now@, next_tick_at = null
where name = $1 and removed_at is null
