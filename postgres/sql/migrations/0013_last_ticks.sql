-- baton:compatible-down-to 11
-- Each job's last ended tick and last success, kept in a row of their own
-- (issue 18). 'baton status', 'baton jobs', the dashboard and /metrics list
-- every job with them: three index probes of the ticks a job, 30,000 for
-- 10,000 jobs, were most of the time of 'baton status'. The listing now
-- joins one row a job.
--
-- The rows are kept by a trigger on the ticks, so every binary that writes
-- ticks keeps them current, those that predate this migration too
-- (compatible-down-to). A tick that ends (inserted ended, as a skip is, or
-- updated to done) raises its job's row:
--   tick_at, outcome  the newest ended tick by its instant, and its outcome
--                     (a tick that ends after a later one does not replace it);
--   succeeded_at      the latest end of a succeeded tick.
-- Pruning old ticks leaves the row as it is: a job whose whole history was
-- pruned by age still shows how its last tick ended.
--
-- Lock order: a tick's end locks its job's row here after the tick's row.
-- No transaction locks them the other way round (claims lock the jobs'
-- rows of the jobs table and insert new ticks), so this adds waits, never a
-- deadlock; two ends of the same job wait for each other a moment.
create table @schema@.last_ticks (
  job          text primary key,
  tick_at      timestamptz not null,
  outcome      text,
  succeeded_at timestamptz
);

create function @schema@.ticks_note_last() returns trigger
language plpgsql
as $$
begin
  insert into @schema@.last_ticks as l (job, tick_at, outcome, succeeded_at)
  values (new.job, new.tick_at, new.outcome,
          case when new.outcome = 'succeeded' then new.ended_at end)
  on conflict (job) do update
    set tick_at = greatest(l.tick_at, excluded.tick_at),
        outcome = case when excluded.tick_at >= l.tick_at then excluded.outcome else l.outcome end,
        succeeded_at = greatest(l.succeeded_at, excluded.succeeded_at);
  return null;
end
$$;

create trigger ticks_note_last
  after insert or update of state, outcome, ended_at on @schema@.ticks
  for each row when (new.state = 'done')
  execute function @schema@.ticks_note_last();

-- What the ticks hold now. The trigger is in place first, and holds off
-- writes to the ticks until this migration commits, so no end is missed
-- or counted from a stale read.
insert into @schema@.last_ticks (job, tick_at, outcome, succeeded_at)
select distinct on (t.job) t.job, t.tick_at, t.outcome,
       (select max(s.ended_at) from @schema@.ticks s
         where s.job = t.job and s.outcome = 'succeeded')
from @schema@.ticks t
where t.state = 'done'
order by t.job, t.tick_at desc
on conflict (job) do nothing;
