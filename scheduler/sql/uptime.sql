-- When daemons ran: each registered daemon seen at or after $1, and the
-- claiming daemon $2 (alive now, however long ago its last heartbeat), from
-- its start to when it was last seen, with its feature level: a missed
-- tick's reason says whether one was running when it fell due that could
-- run it.
select id, started_at, seen_at, feature_level from @schema@.daemons where seen_at >= $1 or id = $2
