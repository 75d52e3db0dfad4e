-- baton:compatible-down-to 9
-- Tokens never go back across a failover (issue 17). With asynchronous
-- replication the last commits before a failover are lost, and with them
-- the lease rows of the last acquisitions: counting on from what the
-- promoted standby holds would hand out tokens already handed out.
--
-- So a token is epoch << 32 | counter, as ZooKeeper's zxid is. The epoch
-- is the server's timeline minus one, plus an offset: a promotion (and a
-- point-in-time recovery) starts a new timeline, so every token issued
-- after it is above every token issued before, lost or not. On timeline 1
-- with no offset the epoch is 0 and tokens are the plain counters they
-- always were. The timeline is the first 8 hex digits of the current WAL
-- file's name, which follows the promotion at once (pg_control_checkpoint
-- can lag until the first checkpoint after it).
--
-- A dump and restore, or a move to another cluster, starts again at
-- timeline 1. `baton migrate --new-epoch` then raises the offset so that
-- the epoch is above every token the schema holds; the system identifier
-- recorded here is how baton notices such a move and warns.
--
-- Binaries that predate this migration still count on from the rows
-- (compatible-down-to): their tokens grow, but only this release's rise
-- above a failover.
create table @schema@.token_epoch (
  only_row          boolean primary key default true check (only_row),
  epoch_offset      bigint not null default 0 check (epoch_offset between 0 and 2147483647),
  -- pg_control_system()'s, when this row was written: another one means
  -- the schema was restored or moved to another cluster
  system_identifier text not null default '',
  changed_at        timestamptz not null default clock_timestamp(),
  reason            text not null default ''
);
insert into @schema@.token_epoch (system_identifier, reason)
select (pg_control_system()).system_identifier::text, 'migration 0011';

-- The offset only rises: lowering it would take tokens back.
create function @schema@.token_epoch_guard() returns trigger
language plpgsql
as $$
begin
  raise exception 'baton: %.token_epoch cannot be lowered or removed (%): fencing tokens would go back', tg_table_schema, tg_op
    using errcode = '55000',
          hint = 'raise the epoch with baton migrate --new-epoch; never lower it';
end
$$;
create trigger token_epoch_guard
  before delete on @schema@.token_epoch
  for each row execute function @schema@.token_epoch_guard();
create trigger token_epoch_guard_update
  before update on @schema@.token_epoch
  for each row when (new.epoch_offset < old.epoch_offset)
  execute function @schema@.token_epoch_guard();
create trigger token_epoch_guard_truncate
  before truncate on @schema@.token_epoch
  for each statement execute function @schema@.token_epoch_guard();

-- token_base() is the current epoch << 32: every token issued now is above
-- it. Acquisitions take greatest(their counter + 1, token_base() + 1).
-- On a standby, pg_current_wal_lsn() raises 55000 (recovery in progress);
-- a write there fails first anyway, with 25006.
create function @schema@.token_base() returns bigint
language sql volatile
as $$
  select (('x' || left(pg_walfile_name(pg_current_wal_lsn()), 8))::bit(32)::bigint - 1 + e.epoch_offset) << 32
    from @schema@.token_epoch e
$$;
