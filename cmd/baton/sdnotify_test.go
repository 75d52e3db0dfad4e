package main_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/internal/tcpproxy"
	"github.com/jackc/pgx/v5"
)

// notification is one datagram that baton sent to $NOTIFY_SOCKET.
type notification struct {
	at    time.Time
	lines []string
}

// notifySocket is the service manager's end of the protocol: a unixgram
// socket, as systemd opens it for a Type=notify service, that records what
// arrives.
type notifySocket struct {
	name string
	mu   sync.Mutex
	got  []notification
}

// listenNotify opens the socket at name: a path, or an abstract name
// ("@…").
func listenNotify(t *testing.T, name string) *notifySocket {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	s := &notifySocket{name: name}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.got = append(s.got, notification{time.Now(), strings.Split(strings.TrimSuffix(string(buf[:n]), "\n"), "\n")})
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		<-done
		if t.Failed() {
			t.Logf("notifications:\n%s", s.dump(time.Time{}))
		}
	})
	return s
}

// lines are the lines received since since that start with prefix.
func (s *notifySocket) lines(since time.Time, prefix string) []notification {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []notification
	for _, n := range s.got {
		if n.at.Before(since) {
			continue
		}
		for _, l := range n.lines {
			if strings.HasPrefix(l, prefix) {
				out = append(out, notification{n.at, []string{l}})
			}
		}
	}
	return out
}

// wait waits for n lines starting with prefix since since.
func (s *notifySocket) wait(t *testing.T, since time.Time, prefix string, n int, within time.Duration) []notification {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := s.lines(since, prefix)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d %q notification(s) within %s, want %d", len(got), prefix, within, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *notifySocket) dump(since time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, n := range s.got {
		if !n.at.Before(since) {
			fmt.Fprintf(&b, "  %s %q\n", n.at.Format("15:04:05.000"), n.lines)
		}
	}
	return b.String()
}

func (s *notifySocket) env(watchdog time.Duration) []string {
	env := []string{"NOTIFY_SOCKET=" + s.name}
	if watchdog > 0 {
		env = append(env, fmt.Sprintf("WATCHDOG_USEC=%d", watchdog.Microseconds()))
	}
	return env
}

// proxiedPG is a PostgreSQL store reached through a proxy the test can cut
// and freeze.
func proxiedPG(t *testing.T) (store, *tcpproxy.Proxy) {
	t.Helper()
	dsn := pgtest.DSN(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := tcpproxy.Start(pgtest.TCPAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	return store{name: "postgres", env: []string{"BATON_DB=" + asURL(t, pgtest.DSNFor(t, cfg.Database, proxy.Addr()))}, dsn: dsn}, proxy
}

// hangOnFreeze gives s's connections a connect timeout longer than any
// test, so that on a frozen proxy a round hangs whichever connection it
// uses: with the default (5 s), a round that needs a new connection fails
// at the timeout instead, and a failed round ends, which is progress by
// design (service.go). Once on CI the claim round dialled during the
// freeze, failed every 6 s, and so pinged.
func hangOnFreeze(s *store) {
	for i, e := range s.env {
		if strings.HasPrefix(e, "BATON_DB=") {
			s.env[i] = e + "&connect_timeout=600"
		}
	}
}

// Under systemd (Type=notify, WatchdogSec=) the daemon says READY=1 once its
// store is open and a claim round has worked, not before; says what it does
// in STATUS= lines; sends WATCHDOG=1 at half of WATCHDOG_USEC while its claim
// loop makes progress and stops when the loop hangs on a frozen store (so
// that systemd restarts it), resuming when the store thaws; and says
// STOPPING=1 when TERM makes it drain.
func TestDaemonNotifiesSystemd(t *testing.T) {
	t.Parallel()
	s, proxy := proxiedPG(t)
	hangOnFreeze(&s)
	// systemd names its socket by path; a container's manager may use the
	// abstract namespace.
	sock := listenNotify(t, fmt.Sprintf("@baton-test-notify-%d-%d", os.Getpid(), time.Now().UnixNano()))
	const watchdog = 2 * time.Second
	s.env = append(s.env, sock.env(watchdog)...)
	ran := filepath.Join(t.TempDir(), "ran")
	config := writeJobFile(t, fmt.Sprintf("jobs:\n  - name: tick\n    schedule: \"* * * * * *\"\n    command: echo $BATON_TICK >> %s\n", ran))

	// The store is away at start: the daemon waits for it (--db-wait) and
	// is not ready.
	proxy.Cut()
	d := s.startDaemon(t, "notify", config, "--db-wait", "5m")
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(d.logText(t), "retrying for up to") {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not say it waits for the store:\n%s", d.logText(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if got := sock.lines(time.Time{}, "READY=1"); len(got) > 0 {
		t.Fatalf("READY=1 while the store was unreachable")
	}
	proxy.Restore()
	ready := sock.wait(t, time.Time{}, "READY=1", 1, time.Minute)[0].at
	// Ready means a claim round worked: the daemon is registered and
	// claims (the job runs soon after).
	waitFile(t, ran, time.Minute)
	if st := sock.wait(t, time.Time{}, "STATUS=", 1, time.Minute); !strings.Contains(strings.Join(st[len(st)-1].lines, ""), "running") {
		t.Errorf("STATUS lines %v, want the runs", st)
	}

	// Alive: WATCHDOG=1 about every second.
	sock.wait(t, ready, "WATCHDOG=1", 3, time.Minute)

	// Hung: the store freezes, a claim round never returns; the pings
	// stop. One round may have ended just before the freeze.
	proxy.Freeze()
	frozen := time.Now()
	// A ping for a round that ended just before the freeze may come late
	// on a loaded box; then none.
	time.Sleep(3 * watchdog)
	settled := time.Now()
	time.Sleep(3 * watchdog)
	if got := sock.lines(settled, "WATCHDOG=1"); len(got) > 0 {
		t.Errorf("%d WATCHDOG=1 while the claim loop hung on a frozen store (frozen at %s):\n%s",
			len(got), frozen.Format("15:04:05.000"), sock.dump(frozen))
	}
	// ...and come back when it thaws.
	proxy.Thaw()
	sock.wait(t, time.Now(), "WATCHDOG=1", 2, time.Minute)

	drain := time.Now()
	if code := d.stop(t); code != 0 {
		t.Fatalf("drain: exit %d", code)
	}
	sock.wait(t, drain, "STOPPING=1", 1, 30*time.Second)
}

// Without $NOTIFY_SOCKET nothing changes, and the jobs never inherit the
// protocol's variables: a job that ran systemd-notify would speak for the
// daemon.
func TestDaemonJobsDoNotInheritNotifySocket(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	sock := listenNotify(t, filepath.Join(t.TempDir(), "notify"))
	s.env = append(s.env, sock.env(time.Minute)...)
	envFile := filepath.Join(t.TempDir(), "env")
	config := writeJobFile(t, fmt.Sprintf("jobs:\n  - name: env\n    schedule: \"* * * * * *\"\n    command: env > %s.tmp && mv %s.tmp %s\n", envFile, envFile, envFile))
	d := s.startDaemon(t, "env", config)
	b := waitFile(t, envFile, 30*time.Second)
	for _, name := range []string{"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"} {
		if strings.Contains(b, "\n"+name+"=") || strings.HasPrefix(b, name+"=") {
			t.Errorf("the job inherited %s", name)
		}
	}
	sock.wait(t, time.Time{}, "READY=1", 1, time.Minute)
	d.stop(t)
}

// The relay says READY=1 after its first delivery round, STATUS= with what
// it delivered, WATCHDOG=1 while its rounds end, none while a round hangs
// on a frozen store, and STOPPING=1 on TERM.
func TestRelayNotifiesSystemd(t *testing.T) {
	t.Parallel()
	s, proxy := proxiedPG(t)
	hangOnFreeze(&s)
	sock := listenNotify(t, filepath.Join(t.TempDir(), "notify"))
	const watchdog = 2 * time.Second
	s.env = append(s.env, sock.env(watchdog)...)
	if r := s.run(t, "outbox", "enqueue", "--topic", "t", "--key", "k1", "{}"); r.code != 0 {
		t.Fatalf("enqueue: %d %s", r.code, r.stderr)
	}
	relay, out := s.startLogged(t, "relay", "relay", "--sink", "noop:", "--poll", "200ms", "--listen=false", "--log-format", "json")
	ready := sock.wait(t, time.Time{}, "READY=1", 1, time.Minute)[0].at
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := sock.lines(time.Time{}, "STATUS=")
		if len(st) > 0 && strings.Contains(st[len(st)-1].lines[0], "delivered 1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no STATUS with the delivery:\n%s\n%s", sock.dump(time.Time{}), out())
		}
		time.Sleep(50 * time.Millisecond)
	}
	sock.wait(t, ready, "WATCHDOG=1", 3, time.Minute)

	proxy.Freeze()
	time.Sleep(3 * watchdog)
	settled := time.Now()
	time.Sleep(3 * watchdog)
	if got := sock.lines(settled, "WATCHDOG=1"); len(got) > 0 {
		t.Errorf("%d WATCHDOG=1 while the relay's rounds hung on a frozen store", len(got))
	}
	proxy.Thaw()
	sock.wait(t, time.Now(), "WATCHDOG=1", 2, time.Minute)

	stop := time.Now()
	relay.Process.Signal(syscall.SIGTERM)
	if code := exitCode(t, relay); code != 0 {
		t.Fatalf("relay exit %d:\n%s", code, out())
	}
	sock.wait(t, stop, "STOPPING=1", 1, 30*time.Second)
}
