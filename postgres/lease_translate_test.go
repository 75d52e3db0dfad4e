package postgres

import (
	"errors"
	"strings"
	"testing"

	"github.com/batonhq/baton"
	"github.com/jackc/pgx/v5/pgconn"
)

// The lease table's refusal of a token that goes back (BF004) is told as
// such, internal: today's acquisition never writes such a token.
func TestLeaserTranslatesTokenBack(t *testing.T) {
	l := &Leaser{db: &DB{dsn: "postgres://h/db", schema: DefaultSchema}}
	err := l.translate(&pgconn.PgError{Code: "BF004", Message: "baton: lease j: fencing token 2 refused"}, "acquiring lease j")
	if baton.ErrorCode(err) != baton.EINTERNAL || !strings.Contains(err.Error(), "does not rise above every token issued") {
		t.Fatalf("BF004: %v (code %q), want internal, saying the store refused the token", err, baton.ErrorCode(err))
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "BF004" {
		t.Fatalf("BF004: the cause is lost: %v", err)
	}
	if err := l.translate(&pgconn.PgError{Code: "53300"}, "acquiring lease j"); baton.ErrorCode(err) != baton.EUNAVAILABLE {
		t.Fatalf("53300: %v, want the database's translation (unavailable)", err)
	}
}
