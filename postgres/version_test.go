package postgres_test

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/batonhq/baton/internal/pgtest"
)

// TestServerVersion logs which server the package's tests ran against and,
// when BATON_EXPECT_PG_MAJOR is set (bench/pg-matrix.sh sets it), fails
// unless it is that major version: a version matrix whose runs quietly fell
// back on the system's PostgreSQL would prove nothing.
func TestServerVersion(t *testing.T) {
	t.Parallel()
	conn := connect(t, pgtest.DSN(t))
	var num int
	var version string
	if err := conn.QueryRow(context.Background(),
		"select current_setting('server_version_num')::int, version()").Scan(&num, &version); err != nil {
		t.Fatal(err)
	}
	t.Logf("server_version_num %d: %s (binaries: %q)", num, version, pgtest.Bin(t))

	want := os.Getenv("BATON_EXPECT_PG_MAJOR")
	if want == "" {
		return
	}
	major, err := strconv.Atoi(want)
	if err != nil {
		t.Fatalf("BATON_EXPECT_PG_MAJOR=%q is not a major version number", want)
	}
	if got := num / 10000; got != major {
		t.Fatalf("the tests ran against PostgreSQL %d (server_version_num %d), want %d as BATON_EXPECT_PG_MAJOR says", got, num, major)
	}
}
