// Command orders is a runnable example of an idempotent receiver: an HTTP
// service on SQLite or PostgreSQL whose writes can be retried safely.
//
//   - POST /orders goes through the Idempotency middleware of package
//     baton/http: the key, the order row and the stored answer commit in one
//     transaction, and a retry with the same key gets the stored answer.
//   - POST /payments calls a payment provider, which no transaction can
//     undo, between two writes. It runs as Steps with recovery points, so a
//     retry after a crash resumes after the last step that committed
//     instead of charging twice.
//
// The flags --slow, --crash-after-step and --no-idempotency exist for the
// end-to-end tests and the benchmark (bench/idempotency.sh); a real
// service has no use for them.
package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	batonhttp "github.com/batonhq/baton/http"
	"github.com/batonhq/baton/idempotency"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/sqlite"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
}

type config struct {
	addr, sqlitePath, dbURL string
	providerLog             string
	lease                   time.Duration
	slow                    time.Duration
	crashAfter              string
	noIdempotency           bool
	readFirst               bool
	handWritten             bool
}

// paymentSteps names the steps of POST /payments, in order; crashPoints
// are where --crash-after-step may kill the server: after the key's lease
// (PointStarted) or after a step committed.
var (
	paymentSteps = []string{"intent", "provider", "result"}
	crashPoints  = append([]string{idempotency.PointStarted}, paymentSteps...)
)

func run(ctx context.Context, args []string, stdout io.Writer) error {
	var cfg config
	fs := flag.NewFlagSet("orders", flag.ContinueOnError)
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:8080", "address to listen on (port 0: any free port)")
	fs.StringVar(&cfg.sqlitePath, "sqlite", "", "SQLite database file (created if missing)")
	fs.StringVar(&cfg.dbURL, "db", "", "PostgreSQL URL, e.g. postgres://user@localhost/shop")
	fs.StringVar(&cfg.providerLog, "provider-log", "provider.log", "file the stand-in payment provider appends its charges to")
	fs.DurationVar(&cfg.lease, "lease", 10*time.Second, "lease of a payment in flight: how long a retry waits before it takes over from a server that died")
	fs.DurationVar(&cfg.slow, "slow", 0, "test: sleep this long inside POST /orders")
	fs.StringVar(&cfg.crashAfter, "crash-after-step", "", "test: SIGKILL the process just after this step of POST /payments committed ("+strings.Join(crashPoints, ", ")+")")
	fs.BoolVar(&cfg.noIdempotency, "no-idempotency", false, "benchmark: serve POST /orders without the middleware")
	fs.BoolVar(&cfg.handWritten, "hand-written", false, "benchmark (PostgreSQL): serve POST /orders without the middleware, with the Idempotency-Key handled by hand in the handler's transaction (key insert, order, stored answer, one commit), for comparison")
	fs.BoolVar(&cfg.readFirst, "read-first", false, "benchmark: the middleware reads the key before its transaction (idempotency.Policy.ReadFirst): faster replays, one more statement per first execution")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (cfg.sqlitePath == "") == (cfg.dbURL == "") {
		return errors.New("give one store: --sqlite PATH or --db URL")
	}
	if cfg.crashAfter != "" && !slices.Contains(crashPoints, cfg.crashAfter) {
		return fmt.Errorf("--crash-after-step %q: want one of %s", cfg.crashAfter, strings.Join(crashPoints, ", "))
	}

	a, closeDB, err := open(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeDB()
	// Keys are kept a day (Policy.TTL); expired ones go in small batches.
	go a.keys.PruneEvery(ctx, time.Minute, 500, func(err error) { log.Printf("pruning idempotency keys: %v", err) })

	mux := http.NewServeMux()
	var orders http.Handler = http.HandlerFunc(a.createOrder)
	if cfg.handWritten && cfg.dbURL == "" {
		return errors.New("--hand-written needs --db (PostgreSQL)")
	}
	if !cfg.noIdempotency && !cfg.handWritten {
		orders = (&batonhttp.Idempotency{Store: a.keys, Required: true, Policy: idempotency.Policy{ReadFirst: cfg.readFirst}}).Wrap(orders)
	}
	mux.Handle("POST /orders", orders)
	mux.HandleFunc("POST /payments", a.createPayment)

	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "listening on %s\n", ln.Addr())
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// Let the requests in progress commit before the database closes.
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// app is the service: its database, where the idempotency keys live too,
// so that a key and the write it guards commit together.
type app struct {
	cfg      config
	db       *sql.DB
	dialect  idempotency.Dialect
	keys     *idempotency.Store
	provider sync.Mutex // one charge at a time in the provider's file
}

func open(ctx context.Context, cfg config) (*app, func(), error) {
	a := &app{cfg: cfg}
	var closeDB func()
	idType := "integer primary key"
	if cfg.dbURL != "" {
		db, err := postgres.Open(ctx, postgres.Config{DSN: cfg.dbURL, Application: "baton-example-orders"})
		if err != nil {
			return nil, nil, err
		}
		a.db, a.dialect, closeDB = db.SQL(), idempotency.Postgres, db.Close
		a.keys = idempotency.NewStore(db.SQL(), idempotency.Postgres, db.Schema())
		idType = "bigserial primary key"
	} else {
		db, err := sqlite.Open(ctx, cfg.sqlitePath)
		if err != nil {
			return nil, nil, err
		}
		a.db, a.dialect, closeDB = db.SQL(), idempotency.SQLite, func() { db.Close() }
		a.keys = idempotency.NewStore(db.SQL(), idempotency.SQLite, "")
	}
	for _, ddl := range []string{
		`create table if not exists orders (id ` + idType + `, item text not null, qty integer not null)`,
		// --hand-written's keys (a benchmark's comparison, not the
		// middleware's table).
		`create table if not exists hand_keys (key text primary key, status integer, body text)`,
		// The idempotency key is the payment's natural key: a step that
		// ran twice would fail here rather than record the payment twice.
		`create table if not exists payments (idempotency_key text primary key, order_id bigint not null,
			amount bigint not null, status text not null, provider_ref text,
			intent_token bigint not null, result_token bigint)`,
	} {
		if _, err := a.db.ExecContext(ctx, ddl); err != nil {
			closeDB()
			return nil, nil, fmt.Errorf("creating the tables: %w", err)
		}
	}
	return a, closeDB, nil
}

// q writes a statement's $n parameters as SQLite's ?n: SQLite reads $1 as
// a name, not a position.
func (a *app) q(query string) string {
	if a.dialect == idempotency.SQLite {
		return strings.ReplaceAll(query, "$", "?")
	}
	return query
}

type order struct {
	ID   int64  `json:"id"`
	Item string `json:"item"`
	Qty  int    `json:"qty"`
}

// createOrder is an ordinary handler: the middleware has done the key's
// work and hands it the transaction in which the key is recorded.
func (a *app) createOrder(w http.ResponseWriter, r *http.Request) {
	var o order
	if err := json.NewDecoder(r.Body).Decode(&o); err != nil || o.Item == "" || o.Qty < 1 {
		batonhttp.WriteProblem(w, http.StatusBadRequest, "Bad Request", `want {"item": "...", "qty": N} with N >= 1`, nil)
		return
	}
	if a.cfg.slow > 0 {
		log.Printf("--slow: holding POST /orders for %v", a.cfg.slow)
		time.Sleep(a.cfg.slow)
	}
	ctx := r.Context()
	if key := r.Header.Get(batonhttp.IdempotencyKeyHeader); a.cfg.handWritten && key != "" {
		a.createOrderByHand(w, r, key, o)
		return
	}
	tx, managed := batonhttp.TxFromContext(ctx)
	if !managed { // --no-idempotency: the same write in a transaction of its own
		var err error
		if tx, err = a.db.BeginTx(ctx, nil); err != nil {
			a.fail(w, r, err)
			return
		}
		defer tx.Rollback()
	}
	err := tx.QueryRowContext(ctx, a.q(`insert into orders (item, qty) values ($1, $2) returning id`), o.Item, o.Qty).Scan(&o.ID)
	if err == nil && !managed {
		err = tx.Commit()
	}
	if err != nil {
		// A 5xx is not stored: the transaction rolls back, key and all,
		// and the client's retry runs again.
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(o)
}

// createOrderByHand is --hand-written: the idempotency key handled by hand
// in the handler's own transaction, the way receivers built by hand do it
// (Brandur's Rocket Rides): insert the key, or answer from it when it is
// there; insert the order; store the answer; commit once. Five statements,
// as the middleware's first execution; it has none of the middleware's
// checks (no fingerprint, so no 422; no 409 while in flight: a concurrent
// duplicate waits for the first to commit, then replays it), and stands
// beside it in bench/idempotency.sh as the floor of a key kept with the
// write.
func (a *app) createOrderByHand(w http.ResponseWriter, r *http.Request, key string, o order) {
	ctx := r.Context()
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	defer tx.Rollback()
	var inserted bool
	var status sql.NullInt64
	var body sql.NullString
	err = tx.QueryRowContext(ctx, `with ins as (insert into hand_keys (key) values ($1) on conflict do nothing returning key)
		select exists (select from ins), k.status, k.body from (select 1) one left join hand_keys k on k.key = $1`, key).Scan(&inserted, &status, &body)
	if err == nil && !inserted && !status.Valid { // committed after the statement's snapshot
		err = tx.QueryRowContext(ctx, `select status, body from hand_keys where key = $1`, key).Scan(&status, &body)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if status.Valid { // stored: replay it
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(int(status.Int64))
		io.WriteString(w, body.String)
		return
	}
	if err := tx.QueryRowContext(ctx, `insert into orders (item, qty) values ($1, $2) returning id`, o.Item, o.Qty).Scan(&o.ID); err != nil {
		a.fail(w, r, err)
		return
	}
	answer, _ := json.Marshal(o)
	if _, err := tx.ExecContext(ctx, `update hand_keys set status = $2, body = $3 where key = $1`, key, http.StatusCreated, string(answer)); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := tx.Commit(); err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	w.Write(answer)
}

type payment struct {
	Order       int64  `json:"order"`
	Amount      int64  `json:"amount"`
	Status      string `json:"status,omitempty"`
	ProviderRef string `json:"provider_ref,omitempty"`
}

// createPayment reads the key itself and runs Steps: the middleware's one
// transaction cannot span the provider's call.
func (a *app) createPayment(w http.ResponseWriter, r *http.Request) {
	values := r.Header.Values(batonhttp.IdempotencyKeyHeader)
	if len(values) == 0 {
		batonhttp.WriteTypedProblem(w, r, batonhttp.ProblemKeyMissing, http.StatusBadRequest, "Idempotency-Key missing", "a payment needs an Idempotency-Key header")
		return
	}
	key, err := batonhttp.ParseIdempotencyKey(strings.Join(values, ", "))
	if err != nil {
		batonhttp.WriteTypedProblem(w, r, batonhttp.ProblemKeyInvalid, http.StatusBadRequest, "Invalid Idempotency-Key", err.Error())
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		batonhttp.WriteTypedProblem(w, r, batonhttp.ProblemBodyTooLarge, http.StatusRequestEntityTooLarge, "Request body too large", err.Error())
		return
	}
	var p payment
	if err := json.Unmarshal(body, &p); err != nil || p.Order < 1 || p.Amount < 1 {
		batonhttp.WriteProblem(w, http.StatusBadRequest, "Bad Request", `want {"order": N, "amount": CENTS}`, nil)
		return
	}
	// The scope is the route alone: this example has no client identity.
	fingerprint := sha256.Sum256(body)
	resp, replayed, err := a.keys.Steps(r.Context(), "POST /payments", key, hex.EncodeToString(fingerprint[:]),
		idempotency.Policy{}, a.cfg.lease, a.paySteps(p))
	if err != nil {
		// As the middleware answers /orders: clients (IdempotentTransport
		// among them) read both routes' answers alike.
		batonhttp.WriteIdempotencyError(w, r, err, nil)
		return
	}
	if !replayed {
		a.crashIfAfter(paymentSteps[len(paymentSteps)-1])
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	if replayed {
		w.Header().Set(batonhttp.ReplayedHeader, "true")
	}
	w.WriteHeader(resp.Status)
	w.Write(resp.Body)
}

// paySteps are the steps of payment p. Each commits its own transaction
// with its name as the recovery point; a retry after a crash starts at the
// step after the last one that committed.
func (a *app) paySteps(p payment) []idempotency.Step {
	return []idempotency.Step{
		{Name: "intent", Run: func(ctx context.Context, tx *sql.Tx, rec *idempotency.Recovery) error {
			a.crashIfAfter(rec.Point())
			_, err := tx.ExecContext(ctx, a.q(`insert into payments (idempotency_key, order_id, amount, status, intent_token)
				values ($1, $2, $3, 'pending', $4)`), rec.Key(), p.Order, p.Amount, rec.Token())
			return err
		}},
		{Name: "provider", Run: func(ctx context.Context, tx *sql.Tx, rec *idempotency.Recovery) error {
			a.crashIfAfter(rec.Point())
			ref, err := a.charge(rec.Key(), rec.Token(), p.Amount)
			if err != nil {
				return err
			}
			// Saved with the recovery point: the next step reads it even
			// if it runs in another process, after a crash.
			return rec.Set(ref)
		}},
		{Name: "result", Run: func(ctx context.Context, tx *sql.Tx, rec *idempotency.Recovery) error {
			a.crashIfAfter(rec.Point())
			var ref string
			if err := rec.Get(&ref); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, a.q(`update payments set status = 'paid', provider_ref = $2, result_token = $3
				where idempotency_key = $1`), rec.Key(), ref, rec.Token())
			if err != nil {
				return err
			}
			p.Status, p.ProviderRef = "paid", ref
			body, err := json.Marshal(p)
			if err != nil {
				return err
			}
			rec.Finish(idempotency.Response{Status: http.StatusCreated,
				Header: map[string][]string{"Content-Type": {"application/json"}}, Body: append(body, '\n')})
			return nil
		}},
	}
}

// charge stands in for a payment provider's API: it cannot take part in
// our transaction. It gets the idempotency key, which a careful provider
// uses to refuse a second charge, and the fencing token, with which it can
// refuse a server that was taken over.
func (a *app) charge(key string, token, amount int64) (ref string, err error) {
	a.provider.Lock()
	defer a.provider.Unlock()
	f, err := os.OpenFile(a.cfg.providerLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "charge key=%q token=%d amount=%d\n", key, token, amount); err != nil {
		return "", err
	}
	// The provider's own reference, known only from its answer: the next
	// step can only read it from the saved data.
	return "ch_" + strconv.FormatInt(time.Now().UnixNano(), 36), f.Sync()
}

// crashIfAfter kills the process, as the kernel's OOM killer would, when
// point is --crash-after-step. Called first thing in each step (and after
// the last), so the named step's recovery point has just committed.
func (a *app) crashIfAfter(point string) {
	if a.cfg.crashAfter == point {
		log.Printf("--crash-after-step %s: killing myself", point)
		p, _ := os.FindProcess(os.Getpid())
		p.Kill()
		select {} // SIGKILL is not instant: never go on to the next step
	}
}

// fail answers an error that is the server's, not the client's, and logs
// it: the problem's detail tells the client only that it may retry.
func (a *app) fail(w http.ResponseWriter, r *http.Request, err error) {
	log.Printf("%s %s: %v", r.Method, r.URL.Path, err)
	batonhttp.WriteError(w, err, nil)
}
