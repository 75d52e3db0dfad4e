-- baton doctor pg: a standby's WAL receiver, no row when none runs. A role
-- without pg_read_all_stats sees its pid only: status NULL.
select coalesce(status, ''),
       received_tli::bigint,
       coalesce(sender_host, ''),
       coalesce(sender_port, 0),
       coalesce(slot_name, '')
from pg_stat_wal_receiver
