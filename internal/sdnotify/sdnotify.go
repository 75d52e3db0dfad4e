// Package sdnotify speaks systemd's service notification protocol
// (sd_notify(3)): a service started with Type=notify tells systemd that it is
// ready (READY=1), what it is doing (STATUS=…), that it is stopping
// (STOPPING=1), and that it is still alive (WATCHDOG=1) by sending
// newline-separated KEY=VALUE lines in one datagram to the unix socket named
// by $NOTIFY_SOCKET. A name that starts with "@" is in the abstract
// namespace.
//
// It is written here rather than taken from a module: the protocol is one
// datagram on a unix socket, about sixty lines with the watchdog's
// environment, and github.com/coreos/go-systemd would bring its D-Bus,
// journal and unit-file packages along for it. What baton needs beyond the
// datagram, deciding when the daemon makes progress, is baton's own code.
//
// Without $NOTIFY_SOCKET (not started by systemd, or Type=simple) New
// returns a nil *Notifier, whose methods do nothing: callers never check.
package sdnotify

import (
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Notifier sends notifications to the service manager.
type Notifier struct {
	conn *net.UnixConn
}

// New connects to the socket that $NOTIFY_SOCKET names (getenv reads the
// environment). It returns nil and no error when the variable is unset or
// empty. The socket must be an absolute path or an abstract name ("@…"), as
// systemd sets it.
func New(getenv func(string) string) (*Notifier, error) {
	name := getenv("NOTIFY_SOCKET")
	if name == "" {
		return nil, nil
	}
	if name[0] != '/' && name[0] != '@' {
		return nil, fmt.Errorf("NOTIFY_SOCKET=%q: want an absolute path or an abstract name starting with @", name)
	}
	// Go's net package maps a leading "@" to the abstract namespace's NUL.
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("NOTIFY_SOCKET=%s: %w", name, err)
	}
	return &Notifier{conn: conn}, nil
}

// Send sends lines (KEY=VALUE each) in one datagram. A nil Notifier sends
// nothing.
func (n *Notifier) Send(lines ...string) error {
	if n == nil {
		return nil
	}
	_, err := n.conn.Write([]byte(strings.Join(lines, "\n") + "\n"))
	return err
}

// States of the service, each a line to Send with a Status.
const (
	Ready    = "READY=1"    // started: systemd's start job ends
	Stopping = "STOPPING=1" // stopping: draining, before the exit
)

// Watchdog keeps the watchdog from firing (WATCHDOG=1).
func (n *Notifier) Watchdog() error { return n.Send("WATCHDOG=1") }

// Status is the STATUS= line of s, on one line.
func Status(s string) string {
	return "STATUS=" + strings.Join(strings.Fields(s), " ")
}

// Close closes the socket. A nil Notifier has nothing to close.
func (n *Notifier) Close() error {
	if n == nil {
		return nil
	}
	return n.conn.Close()
}

// WatchdogInterval is how often systemd expects WATCHDOG=1 from this
// process, from $WATCHDOG_USEC, and 0 when it expects none: the variable is
// unset, or $WATCHDOG_PID names another process (one that passed its
// environment on). An invalid value is an error naming it. Send at half
// the interval, as sd_watchdog_enabled(3) advises.
func WatchdogInterval(getenv func(string) string) (time.Duration, error) {
	usec := getenv("WATCHDOG_USEC")
	if usec == "" {
		return 0, nil
	}
	if pid := getenv("WATCHDOG_PID"); pid != "" && pid != strconv.Itoa(os.Getpid()) {
		return 0, nil
	}
	n, err := strconv.ParseUint(usec, 10, 63)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("WATCHDOG_USEC=%q: want a positive number of microseconds", usec)
	}
	return time.Duration(min(n, uint64(math.MaxInt64/time.Microsecond))) * time.Microsecond, nil
}

// Environment is the environment variables of the protocol, which a
// service removes from what its children inherit: a job that ran
// systemd-notify would otherwise speak for the service.
var Environment = []string{"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"}
