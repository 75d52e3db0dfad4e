-- End a tick that a later tick overtook (see Store.EndOvertaken): with its
-- last attempt's outcome (skipped-missed when it had none), keeping that
-- attempt's exit code and output, and $4 added to its reason.
update @schema@.ticks
set state = 'done',
    outcome = coalesce((select coalesce(a.outcome, 'lost-lease') from @schema@.attempts a
                        where a.job = $1 and a.tick_at = $2 and a.run_id = $3),
                       'skipped-missed'),
    reason = case when reason = '' then $4 else reason || '; ' || $4 end,
    ended_at = @now@, not_before = null
where job = $1 and tick_at = $2 and run_id = $3 and state <> 'done'
returning outcome
