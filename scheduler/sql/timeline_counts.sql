-- The ticks from $3 on of the jobs named from $4 to $5 (a page of the
-- dashboard's overview), at once, for their timelines:
-- counted by slot ($2 microseconds each from $1, the same instant in
-- microseconds) and by outcome (or state, for ticks not ended), with the
-- oldest and newest tick of each count. One pass over the ticks of the
-- window; the caller places the slots and checks each job's count against
-- what its schedule makes.
select job, (@micros(tick_at)@ - $1) / $2,
       case when state <> 'done' then state else coalesce(outcome, '') end,
       count(*), min(tick_at), max(tick_at)
from @schema@.ticks
where job >= $4 and job <= $5 and tick_at >= $3
group by 1, 2, 3
