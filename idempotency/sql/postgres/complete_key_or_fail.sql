-- PostgreSQL only. complete_key for Do, sent with its COMMIT in one round
-- trip (postgres.OpenSQL's pipelining): the commit runs only if this
-- statement succeeds, so it fails (division by zero, 22012) unless it
-- stored the answer, as complete_key's caller checks the rows it updated.
with completed as (
  update @schema@.idempotency_keys
  set state = 'complete', recovery_point = $4, data = $5,
      response_status = $6, response_header = $7, response_body = $8,
      lease_until = null, expires_at = @after($9)@, updated_at = @now@
  where scope = $1 and key = $2 and token = $3 and state = 'in_flight'
  returning 1)
select 1 / count(*) from completed
