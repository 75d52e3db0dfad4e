package postgres

import (
	"testing"

	"github.com/batonhq/baton"
	"github.com/jackc/pgx/v5/pgconn"
)

// A serialization failure or a deadlock is a lost race, to be retried: a
// conflict, like a unique violation, not an internal error.
func TestTranslateRetryable(t *testing.T) {
	db := &DB{dsn: "postgres://h/db", schema: DefaultSchema}
	for code, want := range map[string]baton.Code{
		"40001": baton.ECONFLICT,
		"40P01": baton.ECONFLICT,
		"23505": baton.ECONFLICT,
		"BF001": baton.EFENCED,
		"BF003": baton.EFENCED,
		"25006": baton.EUNAVAILABLE, // a standby: a failover in progress
		"42P01": baton.EINTERNAL,
	} {
		err := &pgconn.PgError{Code: code, Message: "something"}
		if got := baton.ErrorCode(db.translate(err, "doing")); got != want {
			t.Errorf("translate(SQLSTATE %s) = %s, want %s", code, got, want)
		}
		if got := baton.ErrorCode(fenceError(err, "job", 1)); code != "23505" && code != "42P01" && got != want {
			t.Errorf("fenceError(SQLSTATE %s) = %s, want %s", code, got, want)
		}
	}
}
