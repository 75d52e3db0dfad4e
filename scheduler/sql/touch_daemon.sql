-- A heartbeat: the daemon is alive. Its file's versions change only on a
-- load, which rewrites the whole row (upsert_daemon).
update @schema@.daemons set seen_at = @now@ where id = $1
