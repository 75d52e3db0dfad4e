package postgres_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/internal/tcpproxy"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/scheduler"
	"github.com/google/uuid"
)

// The password of every DSN below; its URL-encoded form differs.
const (
	secret        = "Hunter2/s3cr@t"
	secretEncoded = "Hunter2%2Fs3cr%40t"
)

// noSecret fails when text shows the password, in either form, or any
// distinctive part of it.
func noSecret(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range []string{secret, secretEncoded, url.QueryEscape(secret), "Hunter2", "s3cr"} {
		if strings.Contains(text, s) {
			t.Errorf("%s shows the password (%q):\n%s", what, s, text)
			return
		}
	}
}

// TestOpenErrorsHideThePassword opens PostgreSQL with DSNs that carry a
// password and fail in each way Open can fail: refused by the server (an
// unknown role; the test cluster trusts every role that exists, so a wrong
// password alone is not refused), a database that does not exist, nothing
// listening, and DSNs that do not parse. The password must appear in no
// error.
func TestOpenErrorsHideThePassword(t *testing.T) {
	t.Parallel()
	addr := pgtest.TCPAddr(t)
	db := database(t, pgtest.DSN(t))
	urlDSN := func(user, hostport, dbname, query string) string {
		return "postgres://" + user + ":" + secretEncoded + "@" + hostport + "/" + dbname + "?sslmode=disable" + query
	}
	host, port, _ := strings.Cut(addr, ":")
	cases := []struct {
		name, dsn string
		code      baton.Code
	}{
		{"unknown role (URL)", urlDSN("nosuchrole", addr, db, ""), baton.EUNAVAILABLE},
		{"unknown role (keyword/value)", "host=" + host + " port=" + port + " user=nosuchrole password='" + secret + "' dbname=" + db + " sslmode=disable", baton.EUNAVAILABLE},
		{"unknown database", urlDSN("postgres", addr, "nosuchdb", ""), baton.EUNAVAILABLE},
		{"nothing listening (URL)", urlDSN("postgres", "127.0.0.1:1", db, ""), baton.EUNAVAILABLE},
		{"nothing listening (keyword/value)", "host=127.0.0.1 port=1 user=postgres password=" + secret + " dbname=" + db + " sslmode=disable", baton.EUNAVAILABLE},
		{"sslpassword in the URL", urlDSN("postgres", "127.0.0.1:1", db, "&sslpassword="+secretEncoded), baton.EUNAVAILABLE},
		{"bad port", "postgres://postgres:" + secretEncoded + "@127.0.0.1:notaport/" + db, baton.EINVALID},
		{"bad escape", "postgres://postgres:" + secret + "%zz@127.0.0.1/" + db, baton.EINVALID},
		{"unknown sslmode", urlDSN("postgres", addr, db, "&sslmode=sometimes"), baton.EINVALID},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			d, err := postgres.Open(ctx, postgres.Config{DSN: c.dsn})
			if err == nil {
				d.Close()
				t.Fatalf("Open(%s) succeeded", postgres.RedactDSN(c.dsn))
			}
			if code := baton.ErrorCode(err); code != c.code {
				t.Errorf("code %s, want %s: %v", code, c.code, err)
			}
			t.Logf("%s", err)
			noSecret(t, "the error", err.Error())
			noSecret(t, "RedactDSN", postgres.RedactDSN(c.dsn))
		})
	}
}

// TestStoreErrorsHideThePassword opens a store through a proxy with a
// password in the DSN, cuts the proxy, and checks the errors of the lease
// and schedule operations a daemon logs, and the store's own description.
func TestStoreErrorsHideThePassword(t *testing.T) {
	t.Parallel()
	proxy, err := tcpproxy.Start(pgtest.TCPAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	dsn := "postgres://postgres:" + secretEncoded + "@" + proxy.Addr() + "/" + database(t, pgtest.DSN(t)) + "?sslmode=disable&connect_timeout=2"
	ctx := context.Background()
	db, err := postgres.Open(ctx, postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l := postgres.NewLeaser(db)
	st := scheduler.NewStore(db.SQL(), scheduler.Postgres, db.Schema())
	noSecret(t, "Location", db.Location())
	noSecret(t, "String", db.String())
	noSecret(t, "Info", l.Info().Location)

	proxy.Cut()
	var errs []error
	_, err = l.Acquire(ctx, baton.AcquireRequest{Job: "j", TTL: time.Second, Owner: uuid.NewString()})
	errs = append(errs, err)
	_, err = st.ClaimDue(ctx, "d", time.Second, 10)
	errs = append(errs, err)
	_, err = st.Jobs(ctx)
	errs = append(errs, err)
	_, err = st.Now(ctx)
	errs = append(errs, err)
	for i, err := range errs {
		if err == nil {
			t.Errorf("operation %d succeeded through a cut proxy", i)
			continue
		}
		if baton.ErrorCode(err) != baton.EUNAVAILABLE {
			t.Errorf("operation %d: %v, want unavailable", i, err)
		}
		noSecret(t, "the error", err.Error())
	}
}
