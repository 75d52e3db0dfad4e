-- min_level ($7) is the feature level this definition needs; it holds for
-- this version only (min_level_version), see postgres's 0010_fleet_versions.
-- host ($8) is the host of a host-scoped job's instance, '' for a fleet job.
insert into @schema@.jobs as j
  (name, version, definition, next_tick_at, paused, defined_by, defined_at, removed_at,
   min_level, min_level_version, host)
values ($1, $2, $3, $4, $5, $6, @now@, null, $7, $2, $8)
on conflict (name) do update
  set version = excluded.version, definition = excluded.definition,
      next_tick_at = excluded.next_tick_at,
      paused = j.paused or excluded.paused,
      defined_by = excluded.defined_by, defined_at = excluded.defined_at,
      removed_at = null,
      min_level = excluded.min_level, min_level_version = excluded.min_level_version,
      host = excluded.host
