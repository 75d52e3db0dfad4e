-- The mark of one resource; no row when no write to it was ever fenced.
SELECT token FROM fence WHERE resource = ?1
