-- The first tick of a job's kind $3 after instant $2 that has started an
-- attempt: a scheduled tick older than it may no longer start, since a
-- job's scheduled ticks start in tick order.
select tick_at from @schema@.ticks
where job = $1 and tick_at > $2 and kind = $3 and attempts > 0
order by tick_at
limit 1
