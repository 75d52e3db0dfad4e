select version, next_tick_at, removed_at from @schema@.jobs where name = $1
