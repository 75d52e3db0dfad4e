-- The outbox's functions, as today's baton defines them. A repeatable step
-- (see internal/migration): applied after the numbered migrations whenever
-- the hash recorded for it in schema_repeatables is missing or an older
-- one, so that a schema migrated by an older baton gets these bodies even
-- though its migrations are "all applied". 0006_outbox was edited three
-- times after it shipped (the key rules of enqueue, and outbox_settle's
-- try-lock and head promotion); a schema that reached version 6 before the
-- last edit kept the old bodies until this step.
--
-- These functions are defined here from now on: change them here (and
-- append the new hash to HISTORY.sum), never in a numbered migration,
-- which would be overwritten by this step. Keep each signature: a
-- different one is a new function, left beside the old.

-- enqueue: see 0008_outbox_checks.sql for the rules it checks.
create or replace function @schema@.enqueue(
  topic        text,
  key          text,
  payload      jsonb,
  ordering_key text default null,
  headers      jsonb default null,
  not_before   timestamptz default null
) returns bigint language plpgsql as $$
declare
  new_id bigint;
  taken  record;
  h      record;
  n      integer := 0;
  size   integer := 0;
  max_payload integer := coalesce(nullif(current_setting('baton.outbox_max_payload', true), '')::integer, 262144);
begin
  if topic is null or topic !~ '^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$' or octet_length(topic) > 200 then
    raise exception 'outbox: topic %: want dot-separated words of letters, digits, _ and - (at most 200 bytes)',
      coalesce(quote_literal(topic), 'null') using errcode = '22023';
  end if;
  if key is null then
    key := gen_random_uuid()::text;
  elsif key !~ '^[ -~]{1,255}$' then
    raise exception 'outbox: key % must be 1 to 255 printable ASCII characters', quote_literal(key)
      using errcode = '22023';
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
    if octet_length(ordering_key) > 255 then
      raise exception 'outbox: ordering key of % bytes is longer than 255 bytes', octet_length(ordering_key)
        using errcode = '22023';
    end if;
    if ordering_key ~ '[\u0001-\u001f\u007f-\u009f]' then
      raise exception 'outbox: ordering key % holds a control character', to_json(ordering_key)::text
        using errcode = '22023';
    end if;
  end if;
  if headers is null or headers = 'null'::jsonb then
    headers := '{}';
  end if;
  if jsonb_typeof(headers) <> 'object' then
    raise exception 'outbox: headers are a JSON %, want an object of strings (e.g. ''{"Trace-Id": "abc"}'')',
      jsonb_typeof(headers) using errcode = '22023';
  end if;
  for h in select e.key as name, e.value from jsonb_each(headers) e loop
    n := n + 1;
    if jsonb_typeof(h.value) <> 'string' then
      raise exception 'outbox: headers: header % is a JSON %, want a string', quote_literal(h.name), jsonb_typeof(h.value)
        using errcode = '22023';
    end if;
    if h.name = '' or octet_length(h.name) > 256 or h.name ~ '[\u0001-\u001f\u007f-\u009f]' then
      raise exception 'outbox: headers: header name %: want 1 to 256 bytes without control characters', to_json(h.name)::text
        using errcode = '22023';
    end if;
    size := size + octet_length(h.name) + octet_length(h.value #>> '{}');
  end loop;
  if n > 64 then
    raise exception 'outbox: headers: % headers is more than 64', n using errcode = '22023';
  end if;
  if size > 16384 then
    raise exception 'outbox: headers: % bytes of names and values is more than 16384', size using errcode = '22023';
  end if;
  if ordering_key is not null then
    perform @schema@.outbox_lock(ordering_key);
  end if;
  insert into @schema@.outbox as o (topic, event_key, ordering_key, payload, headers, is_head, available_at)
  values (topic, key, ordering_key, payload, headers,
          ordering_key is null or not exists (
            select 1 from @schema@.outbox p
             where p.ordering_key = enqueue.ordering_key and p.state in ('pending', 'dead')),
          greatest(clock_timestamp(), coalesce(not_before, '-infinity')))
  on conflict (event_key) do nothing
  returning o.id into new_id;
  if new_id is null then
    -- The key is taken: the same event (a retried run) is a no-op; another
    -- one would never reach receivers that deduplicate by the key.
    select o.id, o.topic, o.ordering_key, o.payload into taken from @schema@.outbox o where o.event_key = key;
    if taken.topic is distinct from enqueue.topic or taken.ordering_key is distinct from enqueue.ordering_key
       or taken.payload is distinct from enqueue.payload then
      raise exception 'outbox: key % was enqueued before (event %) with another topic, ordering key or payload: a key names one event',
        quote_literal(key), taken.id
        using errcode = '23505',
              hint = 'Enqueue the event unchanged, or give the new event a key of its own.';
    end if;
    return taken.id;
  end if;
  perform pg_notify('baton_outbox', '@schema@');
  return new_id;
end $$;

-- outbox_settle ends events (delivered or skipped) whose claim is token
-- (any claim when token is null) and makes the next event of each of their
-- ordering keys the head. It returns the ids it settled. It never waits for
-- a key's lock: an event whose key a writer holds right now (a transaction
-- that enqueued on it and has not committed) is left for the caller to try
-- again, so that a relay can never deadlock with, or hold up, a business
-- transaction.
create or replace function @schema@.outbox_settle(ids bigint[], token uuid, new_state text)
returns setof bigint language plpgsql as $$
declare
  k text;
  busy text[] := '{}';
begin
  for k in select distinct o.ordering_key from @schema@.outbox o
            where o.id = any(ids) and o.ordering_key is not null order by 1 loop
    if not pg_try_advisory_xact_lock(hashtextextended('@schema@.outbox:' || k, 0)) then
      busy := busy || k;
    end if;
  end loop;
  return query
    update @schema@.outbox o
       set state = new_state, done_at = clock_timestamp(), claim_token = null, claim_until = null
     where o.id = any(ids) and o.state in ('pending', 'dead')
       and (token is null or o.claim_token = token)
       and (o.ordering_key is null or not (o.ordering_key = any(busy)))
    returning o.id;
  -- The next open event of each key: one index probe per key (a min()
  -- grouped by key would read every open event of the key, each time).
  update @schema@.outbox o set is_head = true
    from (select distinct s.ordering_key from @schema@.outbox s
           where s.id = any(ids) and s.ordering_key is not null
             and not (s.ordering_key = any(busy))) k,
         lateral (select p.id from @schema@.outbox p
                   where p.ordering_key = k.ordering_key and p.state in ('pending', 'dead')
                   order by p.id limit 1) nxt
   where o.id = nxt.id and not o.is_head;
end $$;
