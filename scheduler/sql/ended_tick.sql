-- One ended tick of a job, as list_ticks reads it: the one at $2.
select t.job, t.tick_at, t.version, t.kind, t.state, coalesce(t.outcome, ''), t.reason, t.attempts,
       t.host, coalesce(a.daemon, ''), t.token, t.run_id, t.started_at, t.ended_at, t.exit_code, t.output
from @schema@.ticks t
left join @schema@.attempts a on a.job = t.job and a.tick_at = t.tick_at and a.attempt = t.attempts
where t.job = $1 and t.tick_at = $2 and t.state = 'done'
