-- version is the baton that runs the daemon, as 'baton version' prints it;
-- feature_level the job semantics it implements (package scheduler,
-- FeatureLevel).
insert into @schema@.daemons (id, host, pid, config, versions, started_at, seen_at, version, feature_level)
values ($1, $2, $3, $4, $5, @now@, @now@, $6, $7)
on conflict (id) do update
  set config = excluded.config, versions = excluded.versions, seen_at = excluded.seen_at,
      version = excluded.version, feature_level = excluded.feature_level
