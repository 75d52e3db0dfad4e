-- Take open ticks nobody holds: triggered and backfilled ticks, retries
-- whose backoff is over, and ticks of a daemon that stopped renewing its
-- claims (it died, or lost the store). Not the ticks of a job whose
-- definition needs a higher feature level than the claiming daemon's ($4),
-- nor those of another host's instance of a host-scoped job (the claiming
-- daemon's host is $5), nor those of a job this daemon cannot run: a
-- command when it runs none ($6), a Go function when it runs commands or
-- is not a daemon of the function's service ($7).
-- The time is read once, (select @now@): PostgreSQL compares an index's
-- column with a volatile clock_timestamp() row by row, as a filter, but
-- with a subquery's value as the index's condition.
update @schema@.ticks
set claimed_by = $1, claim_until = @after($2)@
where (job, tick_at) in (
  select t.job, t.tick_at from @schema@.ticks t
  where t.state <> 'done' and t.claim_until <= (select @now@)
    and (t.not_before is null or t.not_before <= (select @now@))
    and not exists (
      select 1 from @schema@.jobs j
      where j.name = t.job
        and (j.min_level > $4 and j.min_level_version = j.version or j.host not in ('', $5)
             or not ($6 and @job_func(j)@ is null
                     or not $6 and @job_func(j)@ = $7)))
  order by t.tick_at
  limit $3
  @skip_locked@)
returning job, tick_at, version, kind, state, attempts, run_id, claimed_by
