-- The high-water-mark fence: per resource, the highest fencing token that a
-- write carried. Self-contained (no reference to job_leases), so that
-- `baton migrate --fence-only` can install it in any database that holds
-- results, and idempotent for the same reason.
create table if not exists @schema@.fence (
  resource   text primary key,
  token      bigint not null check (token >= 1),
  updated_at timestamptz not null default clock_timestamp()
);

-- fence(resource, token) advances the mark, or raises SQLSTATE BF001 when
-- token is below it. Call it in the same transaction as the write it guards:
-- the row lock it takes serialises writers of the resource until commit.
create or replace function @schema@.fence(p_resource text, p_token bigint)
returns bigint
language plpgsql
as $$
declare
  highest bigint;
begin
  if p_resource is null or p_resource = '' then
    raise exception 'baton: fence: resource is empty' using errcode = '22023';
  end if;
  if p_token is null or p_token < 1 then
    raise exception 'baton: fence: token % for % is not a fencing token (want an integer >= 1)', p_token, p_resource
      using errcode = '22023';
  end if;
  insert into @schema@.fence as f (resource, token) values (p_resource, p_token)
  on conflict (resource) do update
    set token = excluded.token, updated_at = clock_timestamp()
    where f.token <= excluded.token
  returning f.token into highest;
  if highest is null then
    select f.token into highest from @schema@.fence f where f.resource = p_resource;
    raise exception 'baton: fenced: write to % with fencing token % refused: token % was already seen', p_resource, p_token, highest
      using errcode = 'BF001',
            hint = 'a newer holder of the lease has taken over; this writer must stop';
  end if;
  return highest;
end
$$;
