-- The store's clock, which judges when ticks are due.
select @now@
