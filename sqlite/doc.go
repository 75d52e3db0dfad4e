// Package sqlite adapts SQLite (modernc.org/sqlite, pure Go) to baton: the
// store of one host, its migrations, the high-water fence of a result store
// kept in SQLite, and the translation of SQLite's errors into baton's codes.
//
// # Connections
//
// Every connection is opened with the same settings, carried by the DSN so
// that a connection the pool opens later gets them too (a PRAGMA run with
// Exec would reach one connection only):
//
//   - busy_timeout(5000): a connection that finds the write lock taken waits
//     up to 5 s for it instead of failing at once with SQLITE_BUSY.
//   - journal_mode(WAL): readers do not block the writer nor it them.
//   - synchronous(FULL): a commit is on disk when Commit returns, so a
//     power cut cannot take back a fence that a caller was told had passed.
//     (NORMAL, the usual WAL setting, may lose the last commits.)
//   - foreign_keys(1): SQLite leaves them off unless asked, per connection.
//   - _txlock=immediate: every transaction begun through database/sql is
//     BEGIN IMMEDIATE, a write transaction from its first statement; see
//     [Fence] for why the fence needs that.
//
// # The fence
//
// SQLite admits one writer at a time, across connections and processes,
// and a write transaction always works on the newest committed state. A
// conditional upsert of the fence row inside the caller's write transaction
// ([Fence]) is therefore both the check and the raise of the mark, and no
// other writer can run between it and the caller's commit. The business
// write and the new mark commit, or roll back, together.
package sqlite
