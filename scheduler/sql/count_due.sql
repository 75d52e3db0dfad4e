-- How many jobs are due at $1, up to $2 (the same filter as claim_jobs,
-- without the locks): a daemon of a fleet claims its share of them.
select count(*) from (
  select 1 from @schema@.jobs
  where next_tick_at <= $1 and not paused and removed_at is null
    and (min_level <= $3 or min_level_version <> version)
  limit $2) due
