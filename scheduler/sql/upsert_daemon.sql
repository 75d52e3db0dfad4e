insert into @schema@.daemons (id, host, pid, config, versions, started_at, seen_at)
values ($1, $2, $3, $4, $5, @now@, @now@)
on conflict (id) do update
  set config = excluded.config, versions = excluded.versions, seen_at = excluded.seen_at
