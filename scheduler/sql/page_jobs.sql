-- A page of job definitions after a name, for background pruning.
select name, definition from @schema@.jobs where name > $1 order by name limit $2
