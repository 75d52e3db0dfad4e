-- Raise the mark to ?2 unless it is already higher. Equal tokens pass (one
-- term may write many times) and refresh updated_at. No row comes back when
-- the mark is higher: the write is stale. ?3 is the writer's clock, for
-- display only; nothing compares it.
INSERT INTO fence (resource, token, updated_at)
VALUES (?1, ?2, ?3)
ON CONFLICT (resource) DO UPDATE
  SET token = excluded.token, updated_at = excluded.updated_at
  WHERE excluded.token >= fence.token
RETURNING token
