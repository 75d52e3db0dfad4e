// Command results is a runnable example of a fenced result store served by
// several processes: an HTTP service on PostgreSQL that takes each job's
// result with PUT /results/{job} and the run's Fencing-Token, and refuses
// the write of a run that a newer one has replaced, whichever process
// each write reaches.
//
// The pattern: Fence of package baton/http with baton's own PostgreSQL
// store raises the job's high-water mark in a transaction that it hands
// to the handler (TxFromContext); the handler writes the result in that
// transaction, and Fence commits it. The mark's row stays locked until the
// commit, so a newer token's write, on any process, waits for an older
// one in flight and then goes after it, and an older token that comes
// after a newer one is refused with 409. Writing the result in a
// transaction of its own instead would let a stale write land last.
//
// --fence-key-file makes the service take signed tokens only (baton http
// signs them with the same key: BATON_FENCE_KEY or --fence-key-file).
// --wait-file exists for the end-to-end test: the handler waits until
// that file exists before it writes, to hold a write in flight.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	batonhttp "github.com/batonhq/baton/http"
	"github.com/batonhq/baton/postgres"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "results:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("results", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on (port 0: any free port)")
	dbURL := fs.String("db", "", "PostgreSQL URL, shared by every process of the service")
	keyFile := fs.String("fence-key-file", "", "take only fencing tokens signed with the key in this file")
	waitFile := fs.String("wait-file", "", "test: before each write, wait until this file exists")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dbURL == "" {
		return errors.New("--db is required")
	}
	db, err := postgres.Open(ctx, postgres.Config{DSN: *dbURL, Application: "results"})
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.SQL().ExecContext(ctx, `create table if not exists results (
		job text primary key, token bigint not null, body text not null)`); err != nil {
		return err
	}
	var opts []batonhttp.FenceOption
	if *keyFile != "" {
		key, err := os.ReadFile(*keyFile)
		if err != nil {
			return err
		}
		opts = append(opts, batonhttp.FenceKey([]byte(strings.TrimRight(string(key), "\r\n"))))
	}

	mux := http.NewServeMux()
	fence := batonhttp.Fence(db, batonhttp.ResourceFromPathValue("job"), opts...)
	mux.Handle("PUT /results/{job}", fence(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		job, token, _ := batonhttp.TokenFromContext(r.Context())
		tx, _ := batonhttp.TxFromContext(r.Context()) // the fence's transaction
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(stdout, "fenced %s %d\n", job, token)
		for *waitFile != "" {
			if _, err := os.Stat(*waitFile); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		// In the fence's transaction: it commits with the mark, or not at all.
		_, err = tx.ExecContext(r.Context(), `insert into results (job, token, body) values ($1, $2, $3)
			on conflict (job) do update set token = excluded.token, body = excluded.body`, job, token, string(body))
		if err != nil {
			log.Printf("writing %s: %v", job, err)
			http.Error(w, "the result was not stored", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})))
	mux.HandleFunc("GET /results/{job}", func(w http.ResponseWriter, r *http.Request) {
		var token int64
		var body string
		err := db.SQL().QueryRowContext(r.Context(), "select token, body from results where job = $1", r.PathValue("job")).Scan(&token, &body)
		if err != nil {
			http.Error(w, "no result", http.StatusNotFound)
			return
		}
		fmt.Fprintf(w, "%d %s", token, body)
	})

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "listening on %s\n", ln.Addr())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
