-- insert_tick.sql for all the ticks of a claim in one statement: $1 the
-- jobs, $2 the instants, and per tick its version, kind, state, outcome
-- (null while open), reason and claiming daemon ($3-$8); $9 the claim's TTL
-- in milliseconds. A tick that exists already stays as it is. Returns the
-- ticks it recorded.
insert into @schema@.ticks
  (job, tick_at, version, kind, state, outcome, reason, claimed_by, claim_until, ended_at)
select c.job, c.tick_at, c.version, c.kind, c.state, c.outcome, c.reason, c.claimed_by, @after($9)@,
       case when c.outcome is null then null else @now@ end
from unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])
  as c(job, tick_at, version, kind, state, outcome, reason, claimed_by)
order by c.job, c.tick_at
on conflict (job, tick_at) do nothing
returning job, tick_at
