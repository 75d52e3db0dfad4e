-- The functions of schema $1 named in $2 (all of the schema's when $2 is
-- null), as PostgreSQL holds them (see functions.go): each with its oid,
-- name(input types), and two sha256s that fingerprint its definition:
--   decl: kind, language, volatility, strictness, security (definer or
--         invoker), leakproof, parallel safety, result type, every
--         argument's type, mode and name, how many have defaults, and its
--         settings (proconfig);
--   body: its source (prosrc), as written between the dollar quotes.
-- The files write the schema as @schema@, spliced in as "schema" (quoted):
-- that is written back as @schema@ before hashing, so that a schema of any
-- name hashes as the files do. Types are named without regard to
-- search_path: pg_catalog's by format_type, others by schema and name.
with params as (
  select $1::text as schema
), fn as (
  select p.oid, p.proname, p.prokind, l.lanname, p.provolatile, p.proisstrict, p.prosecdef, p.proleakproof,
         p.proparallel, p.proretset, p.prorettype, p.proargtypes::oid[] as argtypes,
         coalesce(p.proallargtypes, p.proargtypes::oid[]) as allargtypes, p.proargmodes, p.proargnames,
         p.pronargdefaults, p.proconfig, p.prosrc
    from pg_catalog.pg_proc p
    join pg_catalog.pg_language l on l.oid = p.prolang
    join pg_catalog.pg_namespace n on n.oid = p.pronamespace
   where n.nspname = (select schema from params)
     and ($2::text[] is null or p.proname = any ($2::text[]))
), types as (
  select t.oid,
         case when n.nspname = 'pg_catalog' then pg_catalog.format_type(t.oid, null)
              when n.nspname = (select schema from params) then '@schema@.' || pg_catalog.quote_ident(t.typname)
              else pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(t.typname) end as name
    from pg_catalog.pg_type t
    join pg_catalog.pg_namespace n on n.oid = t.typnamespace
   where t.oid in (select unnest(fn.allargtypes || fn.prorettype) from fn)
)
select fn.oid::bigint,
       fn.proname || '(' || coalesce((select string_agg(ty.name, ', ' order by a.n)
                                        from unnest(fn.argtypes) with ordinality a(oid, n)
                                        join types ty on ty.oid = a.oid), '') || ')' as signature,
       pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(pg_catalog.concat_ws(E'\n',
         fn.prokind, fn.lanname, fn.provolatile, fn.proisstrict, fn.prosecdef, fn.proleakproof, fn.proparallel,
         case when fn.proretset then 'setof ' else '' end || (select ty.name from types ty where ty.oid = fn.prorettype),
         coalesce((select string_agg(ty.name, ', ' order by a.n)
                     from unnest(fn.allargtypes) with ordinality a(oid, n)
                     join types ty on ty.oid = a.oid), ''),
         coalesce(fn.proargmodes::text, '-'), coalesce(fn.proargnames::text, '-'), fn.pronargdefaults,
         coalesce((select string_agg(case when c like 'search_path=%'
                                          then 'search_path=' || array_to_string(array(
                                                 select case when trim(both '"' from e) = (select schema from params) then '@schema@' else e end
                                                   from unnest(string_to_array(substr(c, 13), ', ')) e), ', ')
                                          else c end, E'\n')
                     from unnest(fn.proconfig) c), '-')
       ), 'UTF8')), 'hex') as decl,
       pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(
         replace(fn.prosrc, '"' || (select schema from params) || '"', '@schema@'), 'UTF8')), 'hex') as body
  from fn
 order by 2
