-- A job's open ticks before $2 that nobody holds (their claim lapsed or was
-- given back) and that are not running: never started, or waiting for a
-- retry. A daemon that starts ends its @reboot jobs' earlier start ticks
-- of this kind (Store.reboot).
select tick_at, run_id, attempts from @schema@.ticks
where job = $1 and tick_at < $2 and state in ('pending', 'queued')
  and claim_until <= @now@
