-- Take open ticks nobody holds: triggered and backfilled ticks, retries
-- whose backoff is over, and ticks of a daemon that stopped renewing its
-- claims (it died, or lost the store).
update @schema@.ticks
set claimed_by = $1, claim_until = @after($2)@
where (job, tick_at) in (
  select job, tick_at from @schema@.ticks
  where state <> 'done' and claim_until <= @now@
    and (not_before is null or not_before <= @now@)
  order by tick_at
  limit $3
  @skip_locked@)
returning job, tick_at, version, kind, state, attempts, run_id, claimed_by
