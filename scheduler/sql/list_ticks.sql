select job, tick_at, version, kind, state, coalesce(outcome, ''), reason, attempts,
       host, token, run_id, started_at, ended_at, exit_code, output
from @schema@.ticks
where (cast($1 as text) = '' or job = $1)
order by tick_at desc, job
limit $2
