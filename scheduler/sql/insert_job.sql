insert into @schema@.jobs as j
  (name, version, definition, next_tick_at, paused, defined_by, defined_at, removed_at)
values ($1, $2, $3, $4, $5, $6, @now@, null)
on conflict (name) do update
  set version = excluded.version, definition = excluded.definition,
      next_tick_at = excluded.next_tick_at,
      paused = j.paused or excluded.paused,
      defined_by = excluded.defined_by, defined_at = excluded.defined_at,
      removed_at = null
