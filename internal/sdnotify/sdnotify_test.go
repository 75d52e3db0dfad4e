package sdnotify_test

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/sdnotify"
)

// listen opens a notification socket the way systemd does, at name.
func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func receive(t *testing.T, l *net.UnixConn) string {
	t.Helper()
	l.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	n, err := l.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

func TestSendToPathAndAbstractSocket(t *testing.T) {
	for _, name := range []string{
		filepath.Join(t.TempDir(), "notify"),
		"@baton-sdnotify-test-" + strconv.Itoa(os.Getpid()),
	} {
		l := listen(t, name)
		n, err := sdnotify.New(func(k string) string { return map[string]string{"NOTIFY_SOCKET": name}[k] })
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Send(sdnotify.Ready, sdnotify.Status("claimed 3 ticks,\n running 1")); err != nil {
			t.Fatal(err)
		}
		if got, want := receive(t, l), "READY=1\nSTATUS=claimed 3 ticks, running 1\n"; got != want {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
		n.Watchdog()
		if got := receive(t, l); got != "WATCHDOG=1\n" {
			t.Errorf("%s: got %q", name, got)
		}
		n.Close()
	}
}

func TestWithoutSocket(t *testing.T) {
	n, err := sdnotify.New(func(string) string { return "" })
	if n != nil || err != nil {
		t.Fatalf("got %v, %v; want nil, nil", n, err)
	}
	if err := n.Send(sdnotify.Ready); err != nil { // a nil Notifier does nothing
		t.Fatal(err)
	}
	if _, err := sdnotify.New(func(string) string { return "relative/sock" }); err == nil || !strings.Contains(err.Error(), "NOTIFY_SOCKET") {
		t.Fatalf("relative socket: %v", err)
	}
}

func TestWatchdogInterval(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	for _, c := range []struct {
		usec, pid string
		want      time.Duration
		bad       bool
	}{
		{"", "", 0, false},
		{"20000000", "", 20 * time.Second, false},
		{"20000000", self, 20 * time.Second, false},
		{"20000000", "1", 0, false}, // meant for another process
		{"soon", "", 0, true},
		{"0", "", 0, true},
	} {
		env := map[string]string{"WATCHDOG_USEC": c.usec, "WATCHDOG_PID": c.pid}
		got, err := sdnotify.WatchdogInterval(func(k string) string { return env[k] })
		if got != c.want || (err != nil) != c.bad {
			t.Errorf("WATCHDOG_USEC=%q WATCHDOG_PID=%q: got %s, %v", c.usec, c.pid, got, err)
		}
	}
}
