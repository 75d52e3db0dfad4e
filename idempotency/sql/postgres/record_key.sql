-- PostgreSQL only. Do's key, written once and complete with its answer, in
-- the transaction of the business write, last before COMMIT; retention
-- starts now. Nothing is written if the key was committed meanwhile by a
-- writer that did not hold Do's locks (Steps, a baton before this one):
-- the caller then rolls back and reads what that writer committed.
insert into @schema@.idempotency_keys
  (scope, key, fingerprint, state, response_status, response_header, response_body,
   expires_at, created_at, updated_at)
values ($1, $2, $3, 'complete', $4, $5, $6, @after($7)@, @now@, @now@)
on conflict (scope, key) do nothing
