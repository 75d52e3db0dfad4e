select version, next_tick_at, removed_at,
       case when min_level_version = version then min_level else 0 end
from @schema@.jobs where name = $1
