-- Due jobs, oldest first, locked until the claiming transaction commits;
-- jobs another daemon is claiming are skipped, not waited for, and so are
-- jobs whose definition needs a higher feature level than the claiming
-- daemon's ($3): they wait for a daemon that runs them as they mean. A
-- level recorded for an earlier version of the definition does not count.
--
-- The live daemons share the due jobs: with $4 of them, this daemon (the
-- $5th, from 0) claims the jobs whose slot modulo $4 is $5, and another's
-- only once it is due since $6 (that daemon is busy, slow or gone). $4 ≤ 1:
-- every due job. @job_slot@ is a number from the job's name (or row) and its
-- due second (scheduler.NewStore).
--
-- A host-scoped job's instance (host <> '') is claimed only by the daemons
-- of its host ($7), and is not shared out: they are all its daemons.
-- A daemon claims a command's job only if it runs commands ($8), and a Go
-- function's (@job_func@, its service) only if it is a daemon of that
-- service ($9); the claim leaves the functions it did not register to the
-- replicas that did (scheduler/funcs.go).
select name, version, definition, next_tick_at,
       case when min_level_version = version then min_level else 0 end
from @schema@.jobs
where next_tick_at <= $1 and not paused and removed_at is null
  and (min_level <= $3 or min_level_version <> version)
  and (host = '' or host = $7)
  and ($8 and @job_func@ is null or not $8 and @job_func@ = $9)
  and (host <> '' or $4 <= 1 or next_tick_at <= $6 or (@job_slot@ % $4 + $4) % $4 = $5)
order by next_tick_at
limit $2
@skip_locked@
