-- Give a tick back, for another daemon to take at once (a draining daemon).
update @schema@.ticks set claimed_by = '', claim_until = @now@
where job = $1 and tick_at = $2 and claimed_by = $3 and state <> 'done'
