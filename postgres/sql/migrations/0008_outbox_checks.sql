-- baton.enqueue checks everything a relay needs to deliver an event, as
-- outbox.Store.Enqueue does in Go (one event with bad headers once made
-- every relay round fail), and a key names one event: enqueueing it again
-- with another topic, ordering key or payload is refused (23505) instead of
-- returning the first event's id as if it were the same.
--
--   topic         dot-separated words of letters, digits, _ and -, at most
--                 200 bytes
--   key           1 to 255 printable ASCII characters (null: a new UUID)
--   ordering key  at most 255 bytes (not characters), no control
--                 characters ('' is none)
--   headers       an object of at most 64 strings; names of 1 to 256 bytes
--                 without control characters; names and values at most
--                 16 KiB together (null is none)
--   payload       at most baton.outbox_max_payload bytes (262144)
--
-- Bad input raises SQLSTATE 22023 (invalid_parameter_value) with a message
-- naming the field. The signature is unchanged, so callers need no change;
-- rows already in the outbox are left as they are (a relay dead-letters a
-- malformed one when it claims it).
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
