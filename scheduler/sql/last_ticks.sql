-- One job's last ended tick, its outcome and its last success (the job's
-- row of last_ticks; none when no tick of it has ended).
select outcome, tick_at, succeeded_at
from @schema@.last_ticks
where job = $1
