-- The daemons seen within the last $1 milliseconds, by id: the fleet that
-- shares the due jobs (claim_jobs).
select id from @schema@.daemons
where seen_at >= @before($1)@
order by id
