insert into @schema@.attempts
  (job, tick_at, attempt, daemon, host, token, run_id, started_at)
values ($1, $2, $3, $4, $5, $6, $7, @now@)
