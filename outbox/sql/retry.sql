-- A dead event goes back to pending with a fresh count of attempts; it is
-- still its key's head, so it is delivered before the key's later events.
update @schema@.outbox
   set state = 'pending', attempts = 0, available_at = @now@
 where state = 'dead' and ($1 = 0 or id = $1)
