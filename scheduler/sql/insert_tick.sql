-- Record one tick. A tick that exists already (same job and instant) stays
-- as it is: a tick is never created twice.
insert into @schema@.ticks
  (job, tick_at, version, kind, state, outcome, reason, claimed_by, claim_until, ended_at)
values ($1, $2, $3, $4, $5, $6, $7, $8, @after($9)@,
        case when cast($6 as text) is null then null else @now@ end)
on conflict (job, tick_at) do nothing
