-- When daemons ran: each registered daemon seen at or after $1, and the
-- claiming daemon $2 (alive now, however long ago its last heartbeat), from
-- its start to when it was last seen, with its feature level: a missed
-- tick's reason says whether one was running when it fell due that could
-- run it, and on which host (a host-scoped job's instance is run by the
-- daemons of its host only).
select id, started_at, seen_at, feature_level, host from @schema@.daemons where seen_at >= $1 or id = $2
