-- baton doctor pg: primary or standby, and where its WAL is. On a primary
-- the timeline is the first 8 hex digits of the current WAL file's name,
-- which a promotion changes at once (pg_control_checkpoint() lags until the
-- next checkpoint); pg_walfile_name cannot run during recovery, where the
-- WAL receiver tells the timeline (doctor_upstream). Every function here may
-- be called by any role.
select pg_is_in_recovery(),
       case when pg_is_in_recovery() then null else pg_walfile_name(pg_current_wal_lsn()) end,
       case when pg_is_in_recovery() then pg_last_wal_replay_lsn()::text else pg_current_wal_lsn()::text end,
       case when pg_is_in_recovery() then pg_last_wal_receive_lsn()::text end,
       current_setting('synchronous_standby_names'),
       current_setting('synchronous_commit')
