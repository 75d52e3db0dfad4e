-- How many daemons were seen within the last $1 milliseconds: the claim
-- sizes its batch by it, so that a few due ticks spread over the fleet.
select count(*) from @schema@.daemons where seen_at >= @before($1)@
