package scheduler_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/scheduler"
)

// frozenFuncEnv names the store of TestFuncFrozenPastItsWindow's child.
const frozenFuncEnv = "BATON_SCHEDULER_TEST_FROZEN_FUNC"

// frozenFuncTTL is the TTL of the frozen function's job: long enough that
// its renewals, starved by a loaded machine (the child runs on one P),
// still land before the test freezes it (at 2s, beside two CPU hogs, the
// lease was once lost before the freeze).
const frozenFuncTTL = 4 * time.Second

// frozenFuncReplica is the child process of TestFuncFrozenPastItsWindow: a
// service's daemon whose function, at its first call, says so on stdout
// and then looks at its ctx over and over, until one finds it ended or
// follows a pause of the process (a gap longer than the TTL). It says
// whether a pause came, and the ctx's cause then.
func frozenFuncReplica(dsn string) int {
	db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, Application: "baton/test-frozen-func"})
	if err != nil {
		fmt.Println("open:", err)
		return 1
	}
	defer db.Close()
	d := scheduler.New(scheduler.NewStore(db.SQL(), scheduler.Postgres, db.Schema()), postgres.NewLeaser(db), "svc")
	d.Poll, d.ClaimTTL = 50*time.Millisecond, 2*time.Second
	d.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	var first atomic.Bool
	j := baton.Job{Name: "frozen", Schedule: "* * * * * *", TTL: baton.Duration(frozenFuncTTL), KillAfter: baton.Duration(100 * time.Millisecond)}
	if err := d.Func(j, func(ctx context.Context) error {
		if !first.CompareAndSwap(false, true) {
			return nil
		}
		fmt.Println("holding", lease.IdempotencyKey(ctx))
		// It spins for the first seconds, when the test freezes it: a
		// thread running at the freeze runs on at once after the thaw,
		// before the runtime has run the timers that came due meanwhile.
		// A look that began more than a TTL after the one before it
		// follows a pause: it must find the ctx ended, unless the one
		// before did (the pause came within it, before its clock read).
		spin := time.Now().Add(2 * time.Second)
		for prev := time.Now(); ; {
			if prev.After(spin) {
				time.Sleep(2 * time.Millisecond)
			}
			before := time.Now()
			err := ctx.Err()
			if err != nil || before.Sub(prev) > frozenFuncTTL {
				paused := time.Since(prev) > frozenFuncTTL
				fmt.Println("ended paused", paused, "cause", baton.ErrorCode(context.Cause(ctx)))
				return err
			}
			prev = before
		}
	}); err != nil {
		fmt.Println("func:", err)
		return 1
	}
	if err := d.Run(context.Background()); err != nil {
		fmt.Println("run:", err)
		return 1
	}
	return 0
}

// A function whose process is frozen (SIGSTOP) past its trust window finds
// its ctx ended, with an ELEASELOST cause, at its first look after the
// thaw, as lease.Run's fn does: before the daemon's timers have had a
// chance to run. Its tick ends lost-lease.
func TestFuncFrozenPastItsWindow(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	e := pgEnvAt(t, dsn)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// One P: after the thaw, the daemon's goroutines (the window's timer
	// among them) run only once the spinning function is preempted.
	cmd.Env = append(os.Environ(), frozenFuncEnv+"="+dsn, "GOMAXPROCS=1")
	cmd.Stderr = tWriter{t}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGCONT); cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the daemon exited early")
			}
			return l
		case <-time.After(60 * time.Second):
			t.Fatal("the daemon said nothing")
		}
		return ""
	}
	key, ok := strings.CutPrefix(next(), "holding ")
	if !ok {
		t.Fatalf("the daemon said %q, want holding", key)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * frozenFuncTTL / 2)
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if l := next(); l != "ended paused true cause "+string(baton.ELEASELOST) {
		t.Fatalf("after the thaw the function said %q, want its first look at ctx to find it ended with code %s", l, baton.ELEASELOST)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, tr := range mustTicks(t, e, "frozen") {
			if tr.IdempotencyKey() != key {
				continue
			}
			if tr.Outcome != baton.OutcomeLostLease {
				t.Fatalf("the frozen function's tick: %s (%s), want lost-lease", tr.Outcome, tr.Reason)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the frozen function's tick %s did not end", key)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
