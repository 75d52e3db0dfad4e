select name, version, definition, next_tick_at, paused, paused_note, defined_by, defined_at,
       case when min_level_version = version then min_level else 0 end
from @schema@.jobs where name = $1 and removed_at is null
