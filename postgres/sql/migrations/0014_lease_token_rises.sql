-- baton:compatible-down-to 11
-- The store itself refuses a token that goes back (issue 40), whatever
-- binary or SQL written by hand writes it. A new term's token must be above
-- every token that may have been issued for the job:
--   its row's token (on an update);
--   the floor, the highest token of any deleted row (0007): the only record
--     of a deleted row's tokens, kept for the schema, not per job. A row
--     inserted by a baton from before the floor after its job's row was
--     deleted (token 1, after 428) counts on from 1, and only the floor
--     still knows 428;
--   the epoch's base (0011): tokens below it may have been issued on a
--     timeline that a failover lost.
-- Until now the rule lived only in each binary's acquisition: a baton from
-- before the floor gave token 1 after a delete, and every later
-- acquisition, today's too, counted on from that row.
--
--   BF004  a write gives a job a token at or below one that may have been
--          issued for it, gives the same token to another owner, or moves
--          a lease row to another job (its tokens would stay behind)
--
-- Renewals, releases and revokes change neither the token nor the owner:
-- the update trigger's WHEN skips them, so they call no function.
-- INSERT ... ON CONFLICT fires the insert trigger for the row it proposes
-- before it finds the conflict: a row that exists is left to the update
-- trigger, which judges the takeover against the row. A concurrent delete
-- of that row cannot commit in between: it waits for this statement's lock
-- (0007's job_leases_before_delete).
create function @schema@.job_leases_new_term() returns trigger
language plpgsql
as $$
declare
  issued bigint;
begin
  if tg_op = 'UPDATE' then
    if new.job_key is distinct from old.job_key then
      raise exception 'baton: lease % cannot become lease %: its tokens would stay behind', old.job_key, new.job_key
        using errcode = 'BF004',
              hint = 'delete the row instead: the job''s next row starts above its tokens';
    end if;
  elsif exists (select 1 from @schema@.job_leases l where l.job_key = new.job_key) then
    return new; -- ON CONFLICT takes it over, and the update trigger judges that
  end if;
  select greatest(f.fencing_token, @schema@.token_base()) into issued from @schema@.lease_token_floor f;
  if tg_op = 'UPDATE' then
    issued := greatest(issued, old.fencing_token);
  end if;
  if new.fencing_token <= issued then
    raise exception 'baton: lease %: fencing token % refused: tokens up to % may have been issued for the job (its row, the floor of deleted rows or the token epoch), and a new term''s token must be above them', new.job_key, new.fencing_token, issued
      using errcode = 'BF004',
            hint = 'a baton of an older release, or SQL written by hand, counted from a row that went back; upgrade baton: a new term takes greatest(row, floor, epoch base) + 1';
  end if;
  return new;
end
$$;
create trigger job_leases_new_term_insert
  before insert on @schema@.job_leases
  for each row execute function @schema@.job_leases_new_term();
-- Named to fire before 0007's job_leases_token_guard (triggers fire in
-- name order), so that a token set lower is refused with BF004 too.
create trigger job_leases_new_term_update
  before update on @schema@.job_leases
  for each row when (new.fencing_token is distinct from old.fencing_token
                     or new.lease_owner is distinct from old.lease_owner
                     or new.job_key is distinct from old.job_key)
  execute function @schema@.job_leases_new_term();

-- Rows at or below the floor that no one holds go above it now, as their
-- next acquisition by today's baton would take them, so that the
-- acquisitions of older releases (which count on from the row) keep passing
-- while a fleet upgrades. Their terms had ended; a writer still fencing
-- with such a term's token is refused (BF001), as after a takeover. A row
-- held now keeps its term: its next takeover by today's baton goes above
-- the floor, and one by an older release is refused.
update @schema@.job_leases l
   set fencing_token = greatest(f.fencing_token, @schema@.token_base()) + 1
  from @schema@.lease_token_floor f
 where l.fencing_token <= f.fencing_token
   and l.lease_until <= clock_timestamp();
