-- PostgreSQL only. Bound this transaction's lock waits to $1 (is_local:
-- ends with the transaction).
select set_config('lock_timeout', $1, true)
