-- The high-water mark of each resource: the highest fencing token a write to
-- it has carried. One row per resource, kept forever, so that a mark never
-- goes back. STRICT makes SQLite refuse a token that is not an integer and a
-- NULL resource (a plain table would accept both, quietly); the CHECK keeps
-- tokens in the range baton issues (terms start at 1).
CREATE TABLE fence (
  resource   TEXT PRIMARY KEY,
  token      INTEGER NOT NULL CHECK (token >= 1),
  updated_at TEXT NOT NULL
) STRICT;
