-- A daemon that finds a job's definition current but recorded with a lower
-- feature level than it needs (written by an older daemon, or by a binary
-- that predates the gate) raises the level. It never lowers one: a newer
-- daemon may know of a feature that this one does not.
update @schema@.jobs set min_level = $2, min_level_version = version
where name = $1 and (min_level < $2 or min_level_version <> version)
