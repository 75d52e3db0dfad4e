package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/sqlite"
)

// A result store in SQLite takes the fencing token of the run that writes to
// it (from BATON_FENCING_TOKEN) and fences the write in the same
// transaction. A run whose lease was taken over, and which wakes up late
// with an older token, is refused and its write rolls back.
func ExampleFence() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "baton-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(ctx, filepath.Join(dir, "results.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := db.SQL().ExecContext(ctx, "CREATE TABLE report (day TEXT PRIMARY KEY, total INTEGER NOT NULL)"); err != nil {
		panic(err)
	}

	save := func(token int64, total int) error {
		tx, err := db.SQL().BeginTx(ctx, nil) // BEGIN IMMEDIATE
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := sqlite.Fence(ctx, tx, "daily-report", token); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO report VALUES ('2025-06-01', ?) ON CONFLICT (day) DO UPDATE SET total = excluded.total", total); err != nil {
			return err
		}
		return tx.Commit()
	}

	fmt.Println("token 2:", save(2, 120)) // the holder that took over
	err = save(1, 99)                     // the old holder, waking up
	fmt.Println("token 1:", baton.ErrorCode(err), "-", err)

	var total int
	if err := db.SQL().QueryRowContext(ctx, "SELECT total FROM report").Scan(&total); err != nil {
		panic(err)
	}
	fmt.Println("total:", total)
	// Output:
	// token 2: <nil>
	// token 1: fenced - write to daily-report with fencing token 1 refused: token 2 was already seen (a newer holder has taken over)
	// total: 120
}
