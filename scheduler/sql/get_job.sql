select name, version, definition, next_tick_at, paused, paused_note, defined_by, defined_at
from @schema@.jobs where name = $1 and removed_at is null
