-- baton doctor pg: the physical standbys streaming from this server. Logical
-- replication (a WAL sender holding a logical slot) and base backups (state
-- 'backup') are not standbys. A role without pg_read_all_stats sees the
-- pid, user and application of a WAL sender, and NULL for everything else,
-- state included: such a row is hidden. The lags are NULL too once a
-- standby has been caught up for a status interval, until more WAL comes.
select r.pid,
       coalesce(r.application_name, ''),
       coalesce(r.usename::text, ''),
       coalesce(host(r.client_addr), ''),
       r.state is null as hidden,
       coalesce(r.state, ''),
       coalesce(r.sync_state, ''),
       coalesce(r.sync_priority, 0),
       coalesce(r.sent_lsn::text, ''),
       coalesce(r.write_lsn::text, ''),
       coalesce(r.flush_lsn::text, ''),
       coalesce(r.replay_lsn::text, ''),
       pg_wal_lsn_diff(case when pg_is_in_recovery() then pg_last_wal_replay_lsn() else pg_current_wal_lsn() end,
                       r.replay_lsn)::bigint,
       extract(epoch from r.write_lag)::float8,
       extract(epoch from r.flush_lag)::float8,
       extract(epoch from r.replay_lag)::float8
from pg_stat_replication r
where r.state is distinct from 'backup'
  and not exists (select 1 from pg_replication_slots s where s.active_pid = r.pid and s.slot_type = 'logical')
order by r.application_name, r.pid
