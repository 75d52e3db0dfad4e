-- The highest migration applied to the store's schema.
select coalesce(max(version), 0) from @schema@.schema_migrations
