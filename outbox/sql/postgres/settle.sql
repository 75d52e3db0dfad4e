-- End events (delivered or skipped) and promote the next of their keys.
-- $1 is a JSON array of ids; $2 the claim (null: any).
select @schema@.outbox_settle(array(select jsonb_array_elements_text($1::jsonb)::bigint), $2::uuid, $3)
