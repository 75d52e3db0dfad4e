-- Where the job files of the daemons seen within the last $1 milliseconds
-- differ from the store, as postgres/drift.sql reads it (json_each for
-- jsonb_each_text), Go functions and services' daemons alike.
with live as materialized (
  select id, host, versions, config from daemons where seen_at >= @before($1)@
), has as materialized (
  select live.id, e.key as job, e.value as version
  from live, json_each(live.versions) e
)
select j.name, live.id, has.version
from live cross join jobs j
left join has on has.id = live.id and has.job = j.name
where j.removed_at is null and j.host in ('', live.host) and has.version is not j.version
  and (has.version is not null
       or @job_func(j)@ is null and live.config not like 'go:%')
