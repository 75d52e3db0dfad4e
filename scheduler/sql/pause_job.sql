update @schema@.jobs set paused = $2, paused_note = $3, next_tick_at = $4
where name = $1 and removed_at is null
