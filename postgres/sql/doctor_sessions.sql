-- baton doctor pg, PostgreSQL 14+: how sessions ended, per database, since
-- the statistics were last reset.
select datname::text, sessions, sessions_fatal, sessions_killed, sessions_abandoned, stats_reset
from pg_stat_database
where datname is not null
order by datname
