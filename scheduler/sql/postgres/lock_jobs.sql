-- lock_job.sql for the jobs of a batch of starts ($1), in order of name, so
-- that two daemons' batches do not wait for each other in a cycle.
select name from @schema@.jobs where name = any($1::text[]) order by name @for_update@
