-- Where the job files of the daemons seen within the last $1 milliseconds
-- differ from the store: each job the store defines (not removed) that a
-- daemon's file lacks (version null) or has at another version. Only the
-- differences are sent: status and the dashboard read them instead of
-- every daemon's version of every job. A daemon whose versions contain
-- every current (job, version) pair has none, and is not compared job by
-- job (most of a fleet, most of the time). Another host's instance of a
-- host-scoped job is not a daemon's to have. A Go function is drift only
-- for the daemons that register it (their versions name it), and a command
-- not for a service's daemons (config 'go:<service>'): neither is the
-- other's to define.
with live as (
  select d.id, d.host, d.versions, d.config from @schema@.daemons d
  where d.seen_at >= @before($1)@
    and not d.versions @> (select coalesce(jsonb_object_agg(name, version), '{}')
                           from @schema@.jobs where removed_at is null and host in ('', d.host))
), has as (
  select live.id, e.key as job, e.value as version
  from live cross join lateral jsonb_each_text(live.versions) e
)
select j.name, live.id, has.version
from live cross join @schema@.jobs j
left join has on has.id = live.id and has.job = j.name
where j.removed_at is null and j.host in ('', live.host) and has.version is distinct from j.version
  and (has.version is not null
       or @job_func(j)@ is null and live.config not like 'go:%')
