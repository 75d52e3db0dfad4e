-- Each job's version and the feature level it needs, for drift checks
-- (cheap: no history), the host of a host-scoped job's instance, and the
-- service of a Go function.
select name, version, defined_by, defined_at,
       case when min_level_version = version then min_level else 0 end, host,
       coalesce(@job_func@, '')
from @schema@.jobs where removed_at is null
