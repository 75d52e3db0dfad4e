update @schema@.attempts
set ended_at = @now@, exit_code = $4, outcome = $5, reason = $6
where job = $1 and tick_at = $2 and run_id = $3
