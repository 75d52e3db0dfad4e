-- Tokens never go back when lease rows are deleted. Operators delete rows to
-- "unstick" a job, or clean up the rows of jobs and overlap slots (job#2)
-- that are gone; the job's next row must then start above every token it
-- had, or a fence would refuse its new terms and accept the old ones.
--
-- The schema keeps one floor: the highest token of any lease row deleted
-- (or present when this migration ran, so that an upgraded schema starts
-- above every token it granted). A new row starts at the floor + 1
-- (lease_acquire.sql); an existing row goes on from its own token.
create table @schema@.lease_token_floor (
  only_row      boolean primary key default true check (only_row),
  fencing_token bigint not null check (fencing_token >= 0)
);
insert into @schema@.lease_token_floor (fencing_token)
select coalesce(max(fencing_token), 0) from @schema@.job_leases;

-- The floor only rises: removing or lowering it would let the next delete
-- of a lease row take tokens back.
create function @schema@.lease_token_floor_guard() returns trigger
language plpgsql
as $$
begin
  raise exception 'baton: %.lease_token_floor cannot be lowered or removed (%): fencing tokens would go back', tg_table_schema, tg_op
    using errcode = '55000',
          hint = 'the table keeps the highest token of deleted lease rows; leave it alone';
end
$$;
create trigger lease_token_floor_guard
  before delete on @schema@.lease_token_floor
  for each row execute function @schema@.lease_token_floor_guard();
create trigger lease_token_floor_guard_update
  before update on @schema@.lease_token_floor
  for each row when (new.fencing_token < old.fencing_token)
  execute function @schema@.lease_token_floor_guard();
create trigger lease_token_floor_guard_truncate
  before truncate on @schema@.lease_token_floor
  for each statement execute function @schema@.lease_token_floor_guard();

-- A delete first waits for the acquisitions in flight and holds back new
-- ones until it commits. An acquisition reads the floor when its statement
-- starts; one that started before the delete committed, and then waited for
-- the deleted row, would insert a new row with the floor from before it.
-- SHARE ROW EXCLUSIVE conflicts with the ROW EXCLUSIVE lock of inserts and
-- updates, not with the ROW SHARE of fence_lease's FOR SHARE. Deletes are
-- rare and by hand; acquisitions pay nothing for this. A renewal can wait
-- for a long fenced transaction, and every acquisition and renewal queues
-- behind a delete waiting for it: so the delete waits half a second at most,
-- then fails and asks to be retried, rather than stall the fleet.
create function @schema@.job_leases_before_delete() returns trigger
language plpgsql
as $$
declare
  was text := current_setting('lock_timeout');
begin
  if was = '0' or was::interval > interval '500 milliseconds' then
    perform set_config('lock_timeout', '500ms', true);
  end if;
  lock table @schema@.job_leases in share row exclusive mode;
  perform set_config('lock_timeout', was, true);
  return null;
exception when lock_not_available then
  raise exception 'baton: delete from %.job_leases not done, retry it: a lease is being acquired or renewed, waiting for a fenced transaction', tg_table_schema
    using errcode = '55P03',
          hint = 'a delete waits at most half a second, so that no renewal is held up behind it';
end
$$;
create trigger job_leases_before_delete
  before delete on @schema@.job_leases
  for each statement execute function @schema@.job_leases_before_delete();

-- The deleted rows raise the floor, in the deleting transaction.
create function @schema@.job_leases_after_delete() returns trigger
language plpgsql
as $$
begin
  update @schema@.lease_token_floor f set fencing_token = d.top
  from (select max(fencing_token) as top from deleted) d
  where d.top > f.fencing_token;
  return null;
end
$$;
create trigger job_leases_after_delete
  after delete on @schema@.job_leases
  referencing old table as deleted
  for each statement execute function @schema@.job_leases_after_delete();

-- TRUNCATE skips row triggers; it holds ACCESS EXCLUSIVE before this runs.
create function @schema@.job_leases_before_truncate() returns trigger
language plpgsql
as $$
begin
  update @schema@.lease_token_floor f set fencing_token = l.top
  from (select max(fencing_token) as top from @schema@.job_leases) l
  where l.top > f.fencing_token;
  return null;
end
$$;
create trigger job_leases_before_truncate
  before truncate on @schema@.job_leases
  for each statement execute function @schema@.job_leases_before_truncate();

-- A token set lower by hand goes back as surely as a deleted row. Checked in
-- the trigger's WHEN, so that acquisitions call no function.
create function @schema@.job_leases_token_guard() returns trigger
language plpgsql
as $$
begin
  raise exception 'baton: the fencing token of lease % cannot go down (% to %)', old.job_key, old.fencing_token, new.fencing_token
    using errcode = '55000',
          hint = 'tokens only grow; to free a stuck lease, delete its row: the next term starts above its token';
end
$$;
create trigger job_leases_token_guard
  before update of fencing_token on @schema@.job_leases
  for each row when (new.fencing_token < old.fencing_token)
  execute function @schema@.job_leases_token_guard();
