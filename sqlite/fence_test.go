package sqlite_test

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/sqlite"
)

// createResults is the business table of the tests: a result store's
// writes, numbered in commit order (AUTOINCREMENT never reuses an id, so id
// order is commit order even across rollbacks).
const createResults = `CREATE TABLE IF NOT EXISTS results (
  id       INTEGER PRIMARY KEY AUTOINCREMENT,
  resource TEXT NOT NULL,
  token    INTEGER NOT NULL
)`

func openResults(t *testing.T) *sqlite.DB {
	t.Helper()
	db := openTest(t)
	if _, err := db.SQL().Exec(createResults); err != nil {
		t.Fatal(err)
	}
	return db
}

// write is a fenced business write: the fence and the row commit together.
func write(ctx context.Context, db *sql.DB, resource string, token int64) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := sqlite.Fence(ctx, tx, resource, token); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO results (resource, token) VALUES (?, ?)", resource, token); err != nil {
		return err
	}
	return tx.Commit()
}

func resultTokens(t *testing.T, db *sql.DB, resource string) []int64 {
	t.Helper()
	rows, err := db.Query("SELECT token FROM results WHERE resource = ? ORDER BY id", resource)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var tok int64
		if err := rows.Scan(&tok); err != nil {
			t.Fatal(err)
		}
		out = append(out, tok)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func highWater(t *testing.T, db *sqlite.DB, resource string) int64 {
	t.Helper()
	h, err := db.HighWater(context.Background(), resource)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestFenceAcceptsEqualAndHigher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openResults(t)
	if h := highWater(t, db, "report"); h != 0 {
		t.Fatalf("mark of an unseen resource is %d, want 0", h)
	}
	for _, tok := range []int64{1, 1, 5, 5, 6} {
		if err := write(ctx, db.SQL(), "report", tok); err != nil {
			t.Fatalf("write with token %d: %v", tok, err)
		}
	}
	if h := highWater(t, db, "report"); h != 6 {
		t.Fatalf("mark is %d, want 6", h)
	}
	if got := resultTokens(t, db.SQL(), "report"); len(got) != 5 {
		t.Fatalf("results %v, want 5 rows", got)
	}
	// Marks are per resource.
	if err := write(ctx, db.SQL(), "other", 2); err != nil {
		t.Fatal(err)
	}
	if h := highWater(t, db, "report"); h != 6 {
		t.Fatalf("mark of report moved to %d by a write to other", h)
	}
}

// A stale write is refused and leaves nothing behind: not the fence row's
// update, and not the business row written before Fence in the same
// transaction.
func TestFenceRefusesLowerAndWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openResults(t)
	if err := write(ctx, db.SQL(), "report", 7); err != nil {
		t.Fatal(err)
	}
	var before string
	if err := db.SQL().QueryRow("SELECT updated_at FROM fence WHERE resource = 'report'").Scan(&before); err != nil {
		t.Fatal(err)
	}

	tx, err := db.SQL().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO results (resource, token) VALUES ('report', 3)"); err != nil {
		t.Fatal(err)
	}
	err = sqlite.Fence(ctx, tx, "report", 3)
	if baton.ErrorCode(err) != baton.EFENCED {
		t.Fatalf("Fence with 3 below 7: %v, want EFENCED", err)
	}
	if !strings.Contains(err.Error(), "token 3") || !strings.Contains(err.Error(), "token 7") {
		t.Errorf("error does not name both tokens: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}

	if got := resultTokens(t, db.SQL(), "report"); len(got) != 1 || got[0] != 7 {
		t.Fatalf("results %v, want [7]: the stale row must roll back with the refused fence", got)
	}
	var after string
	if err := db.SQL().QueryRow("SELECT updated_at FROM fence WHERE resource = 'report'").Scan(&after); err != nil {
		t.Fatal(err)
	}
	if h := highWater(t, db, "report"); h != 7 || after != before {
		t.Fatalf("fence is %d updated %s, want 7 updated %s", h, after, before)
	}

	// Advance, the HighWater of a store with no write of its own, agrees.
	if err := db.Advance(ctx, "report", 6); baton.ErrorCode(err) != baton.EFENCED {
		t.Fatalf("Advance with 6 below 7: %v, want EFENCED", err)
	}
	if err := db.Advance(ctx, "report", 7); err != nil {
		t.Fatalf("Advance with 7 at 7: %v", err)
	}
	if err := db.Advance(ctx, "report", 8); err != nil || highWater(t, db, "report") != 8 {
		t.Fatalf("Advance with 8: %v, mark %d", err, highWater(t, db, "report"))
	}
}

// An accepted fence that the caller rolls back (its business write failed,
// say) does not raise the mark: the two commit or roll back together.
func TestFenceRollsBackWithCaller(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openResults(t)
	if err := write(ctx, db.SQL(), "report", 2); err != nil {
		t.Fatal(err)
	}
	tx, err := db.SQL().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlite.Fence(ctx, tx, "report", 9); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO results (resource, token) VALUES ('report', 9)"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if h := highWater(t, db, "report"); h != 2 {
		t.Fatalf("mark is %d after a rolled-back fence to 9, want 2", h)
	}
	if got := resultTokens(t, db.SQL(), "report"); len(got) != 1 || got[0] != 2 {
		t.Fatalf("results %v, want [2]", got)
	}
	// The token that was rolled back is still good: nothing saw it.
	if err := write(ctx, db.SQL(), "report", 9); err != nil {
		t.Fatal(err)
	}
}

func TestFenceInvalid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openResults(t)
	for _, tc := range []struct {
		name     string
		resource string
		token    int64
	}{
		{"empty resource", "", 1},
		{"slash in resource", "a/b", 1},
		{"control character", "a\nb", 1},
		{"token 0", "report", 0},
		{"negative token", "report", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := write(ctx, db.SQL(), tc.resource, tc.token); baton.ErrorCode(err) != baton.EINVALID {
				t.Errorf("Fence: %v, want EINVALID", err)
			}
			if err := db.Advance(ctx, tc.resource, tc.token); baton.ErrorCode(err) != baton.EINVALID {
				t.Errorf("Advance: %v, want EINVALID", err)
			}
		})
	}
	if _, err := db.HighWater(ctx, ""); baton.ErrorCode(err) != baton.EINVALID {
		t.Errorf("HighWater(\"\"): %v, want EINVALID", err)
	}
	var n int
	if err := db.SQL().QueryRow("SELECT (SELECT count(*) FROM fence) + (SELECT count(*) FROM results)").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows written by invalid calls (%v)", n, err)
	}
}

// shuffled returns tokens 1..n in an order that goes back often but also
// forward: shuffled within consecutive windows of 8. A full shuffle would
// let through only the running maxima, about ln n of them (6 of 200), and
// leave the commit-order check almost nothing to look at; this one commits
// about a third and refuses the rest.
func shuffled(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i + 1)
	}
	for w := 0; w < n; w += 8 {
		win := out[w:min(w+8, n)]
		rand.Shuffle(len(win), func(i, j int) { win[i], win[j] = win[j], win[i] })
	}
	return out
}

// writers runs tokens through 8 writers, each with its own pool and so its
// own connections, as separate processes would have. Each write is BEGIN
// IMMEDIATE; [Fence, when fenced]; INSERT; COMMIT, with a pause between
// the check and the business write that a fence with a gap between check
// and commit would lose to. It returns how many writes the fence refused.
func writers(t *testing.T, path string, tokens []int64, fenced bool) (refused int) {
	t.Helper()
	ctx := context.Background()
	queue := make(chan int64, len(tokens))
	for _, tok := range tokens {
		queue <- tok
	}
	close(queue)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 8 {
		db, err := sqlite.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		wg.Go(func() {
			for tok := range queue {
				err := writeOne(ctx, db.SQL(), tok, fenced)
				switch baton.ErrorCode(err) {
				case "":
				case baton.EFENCED:
					mu.Lock()
					refused++
					mu.Unlock()
				default:
					t.Errorf("write with token %d: %v", tok, err)
				}
			}
		})
	}
	wg.Wait()
	return refused
}

func writeOne(ctx context.Context, db *sql.DB, tok int64, fenced bool) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if fenced {
		if err := sqlite.Fence(ctx, tx, "report", tok); err != nil {
			return err
		}
	}
	time.Sleep(50 * time.Microsecond)
	if _, err := tx.ExecContext(ctx, "INSERT INTO results (resource, token) VALUES ('report', ?)", tok); err != nil {
		return err
	}
	return tx.Commit()
}

// Invariant 3 over SQLite: with many writers racing, no write commits after
// a write with a higher token did.
func TestFenceConcurrentWritersNoStaleWrite(t *testing.T) {
	t.Parallel()
	const n = 200
	db := openResults(t)
	refused := writers(t, db.Path(), shuffled(n), true)
	got := resultTokens(t, db.SQL(), "report")
	for i := 1; i < len(got); i++ {
		if got[i] < got[i-1] {
			t.Fatalf("stale write committed: token %d after %d (commit order %v)", got[i], got[i-1], got)
		}
	}
	if refused == 0 {
		t.Fatal("no write was refused: the test exercised nothing")
	}
	if len(got)+refused != n {
		t.Fatalf("%d committed + %d refused != %d writes", len(got), refused, n)
	}
	if h := highWater(t, db, "report"); h != n {
		t.Fatalf("mark is %d, want %d", h, n)
	}
	t.Logf("%d writes committed, %d refused", len(got), refused)
}

// The control: the same writers without the fence do commit stale writes,
// so the test above passes because of the fence and not of the schedule.
func TestNoFenceControl(t *testing.T) {
	t.Parallel()
	db := openResults(t)
	writers(t, db.Path(), shuffled(40), false)
	got := resultTokens(t, db.SQL(), "report")
	for i := 1; i < len(got); i++ {
		if got[i] < got[i-1] {
			return
		}
	}
	t.Fatalf("without the fence, commit order %v never went back: the scenario cannot show a stale write", got)
}

// A deferred transaction (plain BEGIN, not what DB.SQL gives) that reads
// before fencing: another writer commits in between, and SQLite refuses to
// let the old snapshot write. Had it not, token 5 would pass against the
// mark 5 that the snapshot shows, though the mark is now 6.
func TestFenceDeferredTransactionBusySnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openResults(t)
	if err := db.Advance(ctx, "report", 5); err != nil {
		t.Fatal(err)
	}
	deferred := openDeferred(t, db.Path())

	tx, err := deferred.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var seen int64
	if err := tx.QueryRowContext(ctx, "SELECT token FROM fence WHERE resource = 'report'").Scan(&seen); err != nil || seen != 5 {
		t.Fatalf("read %d, %v", seen, err)
	}
	if err := db.Advance(ctx, "report", 6); err != nil {
		t.Fatal(err)
	}
	err = sqlite.Fence(ctx, tx, "report", 5)
	if baton.ErrorCode(err) != baton.ECONFLICT {
		t.Fatalf("Fence from a stale snapshot: %v, want ECONFLICT (SQLITE_BUSY_SNAPSHOT)", err)
	}
	t.Log(err)
	tx.Rollback()
	if h := highWater(t, db, "report"); h != 6 {
		t.Fatalf("mark is %d, want 6", h)
	}
}

// A deferred transaction that reads, then fences while another connection
// holds the write lock, fails at once with SQLITE_BUSY: SQLite does not
// wait on busy_timeout for a transaction that already holds a snapshot.
func TestFenceDeferredTransactionBusyAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openResults(t)
	if err := db.Advance(ctx, "report", 5); err != nil {
		t.Fatal(err)
	}
	deferred := openDeferred(t, db.Path())

	tx, err := deferred.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var seen int64
	if err := tx.QueryRowContext(ctx, "SELECT token FROM fence WHERE resource = 'report'").Scan(&seen); err != nil {
		t.Fatal(err)
	}
	writer, err := db.SQL().BeginTx(ctx, nil) // IMMEDIATE: holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Rollback()

	start := time.Now()
	err = sqlite.Fence(ctx, tx, "report", 5)
	if baton.ErrorCode(err) != baton.EUNAVAILABLE {
		t.Fatalf("Fence while another connection writes: %v, want EUNAVAILABLE (SQLITE_BUSY)", err)
	}
	t.Log(err)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Fence waited %v; SQLite should refuse the upgrade at once", d)
	}
}

// openDeferred opens a pool on path whose transactions are plain BEGIN.
func openDeferred(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(path)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// The store itself refuses a mark that goes down, whatever SQL writes it:
// an UPDATE by hand, or an upsert without Fence's condition. Equal and
// higher marks pass, and Fence still answers a stale token with EFENCED.
func TestFenceMarkCannotGoDownByHand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openTest(t)
	if err := db.Advance(ctx, "report", 7); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		"UPDATE fence SET token = 3 WHERE resource = 'report'",
		"INSERT INTO fence (resource, token, updated_at) VALUES ('report', 6, 'now') ON CONFLICT (resource) DO UPDATE SET token = excluded.token",
	} {
		_, err := db.SQL().ExecContext(ctx, sql)
		if err == nil || !strings.Contains(err.Error(), "cannot go down") {
			t.Errorf("%s: %v; want the store's refusal", sql, err)
		}
	}
	if h := highWater(t, db, "report"); h != 7 {
		t.Fatalf("mark after the refused writes = %d, want 7", h)
	}
	if err := db.Advance(ctx, "report", 6); baton.ErrorCode(err) != baton.EFENCED {
		t.Fatalf("Advance with 6 below 7: %v, want EFENCED", err)
	}
	for _, sql := range []string{
		"UPDATE fence SET updated_at = 'later' WHERE resource = 'report'",
		"UPDATE fence SET token = 9 WHERE resource = 'report'",
	} {
		if _, err := db.SQL().ExecContext(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if h := highWater(t, db, "report"); h != 9 {
		t.Fatalf("mark after the update to 9 = %d, want 9", h)
	}
}
