-- The transactional outbox (package outbox): events written in the
-- transaction of a business write, delivered afterwards by relays, at
-- least once, always with the same key.
--
-- Per-key order: of the events sharing an ordering key, only the head (the
-- oldest not yet delivered or skipped) may be claimed. is_head marks it.
-- Enqueue and settle serialise on a transaction-scoped advisory lock per
-- ordering key (outbox_lock), so a new event and the settling of its
-- predecessor cannot both miss each other; the lock pins no session.
create table @schema@.outbox (
  id            bigint generated always as identity primary key,
  topic         text not null,
  event_key     text not null unique,      -- the idempotency key receivers deduplicate by
  ordering_key  text,                      -- null: no order with any other event
  payload       jsonb not null,
  headers       jsonb not null default '{}',
  state         text not null default 'pending'
                check (state in ('pending', 'delivered', 'dead', 'skipped')),
  is_head       boolean not null,          -- claimable (when pending): first open event of its key
  attempts      integer not null default 0,
  available_at  timestamptz not null default clock_timestamp(), -- not before / next retry
  claim_token   uuid,                      -- the relay's claim; settles must name it
  claim_until   timestamptz,
  claimed_by    text,
  last_error    text,
  created_at    timestamptz not null default clock_timestamp(),
  done_at       timestamptz                -- delivered or skipped at
);
create index outbox_ready on @schema@.outbox (id) where state = 'pending' and is_head;
create index outbox_open_key on @schema@.outbox (ordering_key, id)
  where state in ('pending', 'dead') and ordering_key is not null;
create index outbox_open_topic on @schema@.outbox (topic, created_at) where state in ('pending', 'dead');
create index outbox_done on @schema@.outbox (done_at) where state in ('delivered', 'skipped');

-- Relays report here every few seconds (baton outbox status: relays active).
create table @schema@.outbox_relays (
  id         text primary key,
  host       text not null,
  pid        integer not null,
  sink       text not null,                -- the sink, without secrets
  topics     text not null,                -- comma-separated; '' = all
  started_at timestamptz not null default clock_timestamp(),
  seen_at    timestamptz not null default clock_timestamp(),
  delivered  bigint not null default 0,
  failed     bigint not null default 0
);

create function @schema@.outbox_lock(k text) returns void language sql as $$
  select pg_advisory_xact_lock(hashtextextended('@schema@.outbox:' || k, 0))
$$;

-- enqueue writes one event in the caller's transaction and returns its id
-- (the existing event's id when the key was enqueued before: a no-op).
-- For shell jobs and other languages:
--   select baton.enqueue('orders.created', 'order-42', '{"id": 42}');
create function @schema@.enqueue(
  topic        text,
  key          text,
  payload      jsonb,
  ordering_key text default null,
  headers      jsonb default null,
  not_before   timestamptz default null
) returns bigint language plpgsql as $$
declare
  new_id bigint;
  max_payload integer := coalesce(nullif(current_setting('baton.outbox_max_payload', true), '')::integer, 262144);
begin
  if topic is null or topic !~ '^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$' or length(topic) > 200 then
    raise exception 'outbox: topic %: want dot-separated words of letters, digits, _ and - (at most 200 bytes)',
      coalesce(quote_literal(topic), 'null') using errcode = '22023';
  end if;
  if key is null then
    key := gen_random_uuid()::text;
  elsif key = '' or length(key) > 400 then
    raise exception 'outbox: key must be 1 to 400 bytes' using errcode = '22023';
  end if;
  if payload is null then
    raise exception 'outbox: payload must not be null (JSON null is allowed: ''null''::jsonb)' using errcode = '22023';
  end if;
  if octet_length(payload::text) > max_payload then
    raise exception 'outbox: payload of % bytes is over the limit of %', octet_length(payload::text), max_payload
      using errcode = '22023';
  end if;
  if ordering_key = '' then
    ordering_key := null;
  end if;
  if ordering_key is not null then
    if length(ordering_key) > 400 then
      raise exception 'outbox: ordering key longer than 400 bytes' using errcode = '22023';
    end if;
    perform @schema@.outbox_lock(ordering_key);
  end if;
  insert into @schema@.outbox as o (topic, event_key, ordering_key, payload, headers, is_head, available_at)
  values (topic, key, ordering_key, payload, coalesce(headers, '{}'),
          ordering_key is null or not exists (
            select 1 from @schema@.outbox p
             where p.ordering_key = enqueue.ordering_key and p.state in ('pending', 'dead')),
          greatest(clock_timestamp(), coalesce(not_before, '-infinity')))
  on conflict (event_key) do nothing
  returning o.id into new_id;
  if new_id is null then
    select o.id into new_id from @schema@.outbox o where o.event_key = key;
    return new_id;
  end if;
  perform pg_notify('baton_outbox', '@schema@');
  return new_id;
end $$;

-- outbox_settle ends events (delivered or skipped) whose claim is token
-- (any claim when token is null) and makes the next event of each of their
-- ordering keys the head. It returns the ids it settled.
create function @schema@.outbox_settle(ids bigint[], token uuid, new_state text)
returns setof bigint language plpgsql as $$
declare
  k text;
begin
  for k in select distinct o.ordering_key from @schema@.outbox o
            where o.id = any(ids) and o.ordering_key is not null order by 1 loop
    perform @schema@.outbox_lock(k);
  end loop;
  return query
    update @schema@.outbox o
       set state = new_state, done_at = clock_timestamp(), claim_token = null, claim_until = null
     where o.id = any(ids) and o.state in ('pending', 'dead')
       and (token is null or o.claim_token = token)
    returning o.id;
  update @schema@.outbox o set is_head = true
   where o.id in (select min(p.id) from @schema@.outbox p
                   where p.ordering_key in (select s.ordering_key from @schema@.outbox s
                                             where s.id = any(ids) and s.ordering_key is not null)
                     and p.state in ('pending', 'dead')
                   group by p.ordering_key)
     and not o.is_head;
end $$;
