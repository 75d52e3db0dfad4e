-- baton:compatible-down-to 5
-- The store itself refuses a fence mark that goes down (issue 40), whatever
-- SQL writes it: Fence's upsert never lowers a mark (its DO UPDATE has a
-- WHERE), but an UPDATE by hand, or an upsert without that condition, did,
-- and a lowered mark lets a stale writer through. The same rule as the
-- lease table's in PostgreSQL (0014_lease_token_rises there). The local
-- store's lease tokens are not in SQLite but in the lock files (flock/).
CREATE TRIGGER fence_mark_rises
BEFORE UPDATE OF token ON fence
FOR EACH ROW WHEN NEW.token < OLD.token
BEGIN
  SELECT RAISE(ABORT, 'baton: the fence mark of ' || OLD.resource || ' cannot go down (' || OLD.token || ' to ' || NEW.token || '): tokens only grow, and a mark lowered would let a stale writer through');
END;
