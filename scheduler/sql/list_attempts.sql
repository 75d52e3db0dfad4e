select attempt, daemon, host, token, run_id, started_at, ended_at, exit_code,
       coalesce(outcome, ''), reason
from @schema@.attempts
where job = $1 and tick_at = $2
order by attempt
