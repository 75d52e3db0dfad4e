-- Each job's version, for drift checks (cheap: no history).
select name, version, defined_by, defined_at from @schema@.jobs where removed_at is null
