-- baton doctor pg: advisory locks held, by session. pg_locks does not say
-- whether an advisory lock is session- or transaction-level; a lock held by
-- a session with no open transaction can only be session-level. A bigint
-- key is split over classid and objid (objsubid 1); two int keys are one
-- each (objsubid 2), stored as unsigned oids.
select l.pid,
       count(*)::int,
       array_agg(case l.objsubid
                   when 1 then ((l.classid::bigint << 32) | l.objid::bigint)::text
                   else ((l.classid::bigint + 2147483648) % 4294967296 - 2147483648)::text || ','
                        || ((l.objid::bigint + 2147483648) % 4294967296 - 2147483648)::text
                 end order by l.classid, l.objid),
       coalesce(bool_and(a.xact_start is null and a.state is not null), false)
from pg_locks l
left join pg_stat_activity a on a.pid = l.pid
where l.locktype = 'advisory' and l.granted and l.pid is not null
group by l.pid
order by l.pid
