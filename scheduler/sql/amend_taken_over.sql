-- Add to the reason of a tick that a takeover ended lost-lease ($5) while
-- attempt $3 was the tick's current one, what that attempt's daemon knows
-- and could not record before its claim lapsed ($4: how the run ended).
-- Once: a reason that holds the note already is left as it is.
update @schema@.ticks
set reason = $4 || '. ' || coalesce(reason, '')
where job = $1 and tick_at = $2 and run_id = $3 and state = 'done' and outcome = $5
  and coalesce(reason, '') not like '%' || $4 || '%'
