-- Each job's version and the feature level it needs, for drift checks
-- (cheap: no history).
select name, version, defined_by, defined_at,
       case when min_level_version = version then min_level else 0 end
from @schema@.jobs where removed_at is null
