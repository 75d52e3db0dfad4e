-- PostgreSQL only. Give the transaction back the session's lock_timeout,
-- so that the caller's business writes wait for locks as they would
-- without this package.
set local lock_timeout to default
