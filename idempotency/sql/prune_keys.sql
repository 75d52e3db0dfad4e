-- Delete a small batch of completed keys past their retention. Keys in
-- flight are kept: a retry may still resume them.
delete from @schema@.idempotency_keys
where (scope, key) in (
  select scope, key from @schema@.idempotency_keys
  where state = 'complete' and expires_at <= $1
  limit $2)
