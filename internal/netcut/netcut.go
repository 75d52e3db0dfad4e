// Package netcut partitions one user's processes from a TCP port on
// loopback, for tests: a network partition between a client (baton run, a
// daemon) and its server (PostgreSQL) on one machine, with the client
// running as a user of its own.
//
// A Partition matches the client by its uid (iptables' owner match, which
// sees only locally generated packets, in OUTPUT) and the server by its
// port, and drops packets one way or both:
//
//   - Requests: the user's packets to the port. Its statements and new
//     connections never arrive; the server sees an idle client.
//   - Replies: the server's packets back on the user's connections. The
//     user's statements arrive and commit, but it never learns of it (a
//     lost reply); a new connection's SYN arrives and its SYN-ACK is lost.
//     The server's packets are owned by the server's user, not the
//     client's, so the user's connections are marked (CONNMARK) by their
//     own packets, from the start, and the replies are matched by that
//     mark.
//   - Both.
//
// Packets are dropped, not refused: the client sees a network that went
// silent, and notices only by its own timeouts, as it would a cable cut or
// a frozen switch. TCP retransmits what was dropped once the partition
// heals, so connections that were not given up on resume.
//
// Every rule carries the comment "baton-test-<pid>" of the test process
// that added it. New removes the rules of such processes that are no
// longer running (a test binary killed before its cleanup), and each
// Partition removes its own rules when its test ends, passed or failed.
// Other processes' traffic (the server's other clients, other users, other
// ports) is never matched.
//
// It needs root and iptables (Debian: the iptables package; either the nft
// or the legacy backend). Missing either fails the test: a partition test
// that silently does not run is worse than one that fails.
package netcut

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Direction is which packets a partition drops.
type Direction int

const (
	// Requests drops the user's packets to the port.
	Requests Direction = 1 << iota
	// Replies drops the port's packets on the user's connections.
	Replies
	// Both drops both.
	Both = Requests | Replies
)

func (d Direction) String() string {
	switch d {
	case Requests:
		return "requests"
	case Replies:
		return "replies"
	case Both:
		return "both"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// tagPrefix starts every rule's comment; the test process's pid follows.
const tagPrefix = "baton-test-"

// xtablesMu serialises this process's calls: iptables' own lock (-w) makes
// concurrent calls wait rather than fail, but only between processes that
// use it.
var xtablesMu sync.Mutex

// Partition cuts the processes of one uid off a TCP port on loopback.
type Partition struct {
	t    testing.TB
	bin  string
	uid  int
	port int
	tag  string
	mark string

	mu  sync.Mutex
	cut Direction // the drop rules in place
}

// New prepares a partition of uid's processes from port on 127.0.0.1:
// it marks the user's connections to the port from now on (so that
// Replies can find them), and removes every rule New added, when the test
// ends. uid must be one that only this test's processes use.
func New(t testing.TB, uid, port int) *Partition {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("netcut: a partition needs root (iptables); the tests run as root in CI")
	}
	bin, err := iptables()
	if err != nil {
		t.Fatalf("netcut: %v", err)
	}
	p := &Partition{
		t: t, bin: bin, uid: uid, port: port,
		tag: tagPrefix + strconv.Itoa(os.Getpid()),
		// The uid is this test's own, so is the mark; the rules also
		// name the port, which is this test binary's server's.
		mark: fmt.Sprintf("0x%x", uid),
	}
	if err := sweep(bin); err != nil {
		t.Fatalf("netcut: removing the rules of earlier test processes: %v", err)
	}
	t.Cleanup(func() {
		p.Heal()
		if err := p.iptables("-D", p.markRule()...); err != nil {
			t.Errorf("netcut: %v", err)
		}
	})
	if err := p.iptables("-I", p.markRule()...); err != nil {
		t.Fatalf("netcut: %v", err)
	}
	return p
}

// Cut drops the packets of dir (in addition to any already dropped).
func (p *Partition) Cut(dir Direction) {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range []Direction{Requests, Replies} {
		if dir&d != 0 && p.cut&d == 0 {
			if err := p.iptables("-I", p.dropRule(d)...); err != nil {
				p.t.Fatalf("netcut: %v", err)
			}
			p.cut |= d
		}
	}
}

// Heal removes every drop rule: packets flow both ways again.
func (p *Partition) Heal() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range []Direction{Requests, Replies} {
		if p.cut&d != 0 {
			if err := p.iptables("-D", p.dropRule(d)...); err != nil {
				p.t.Errorf("netcut: %v", err)
				continue
			}
			p.cut &^= d
		}
	}
}

// markRule marks the connections the user opens to the port.
func (p *Partition) markRule() []string {
	return p.rule("--dport", "-m", "owner", "--uid-owner", strconv.Itoa(p.uid),
		"-j", "CONNMARK", "--set-mark", p.mark)
}

func (p *Partition) dropRule(d Direction) []string {
	if d == Requests {
		return p.rule("--dport", "-m", "owner", "--uid-owner", strconv.Itoa(p.uid), "-j", "DROP")
	}
	return p.rule("--sport", "-m", "connmark", "--mark", p.mark, "-j", "DROP")
}

// rule is a rule of OUTPUT on loopback for the port as portFlag (--dport or
// --sport) that carries this process's tag.
func (p *Partition) rule(portFlag string, rest ...string) []string {
	r := []string{"OUTPUT", "-o", "lo", "-p", "tcp", portFlag, strconv.Itoa(p.port),
		"-m", "comment", "--comment", p.tag}
	return append(r, rest...)
}

func (p *Partition) iptables(op string, rule ...string) error {
	return run(p.bin, append([]string{op}, rule...)...)
}

// run runs iptables with -w (wait for the xtables lock that other
// processes may hold).
func run(bin string, args ...string) error {
	xtablesMu.Lock()
	defer xtablesMu.Unlock()
	out, err := exec.Command(bin, append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// sweep removes the rules of test processes that are no longer running.
// A running one's are left alone: it may be another package's tests, or
// another checkout's, partitioning its own server.
func sweep(bin string) error {
	xtablesMu.Lock()
	out, err := exec.Command(bin, "-w", "-S", "OUTPUT").Output()
	xtablesMu.Unlock()
	if err != nil {
		return fmt.Errorf("iptables -S OUTPUT: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// -S prints each rule as the arguments that add it, and our
		// rules hold no quoted words.
		args := strings.Fields(sc.Text())
		if len(args) < 2 || args[0] != "-A" || !stale(args) {
			continue
		}
		args[0] = "-D"
		if err := run(bin, args...); err != nil {
			return err
		}
	}
	return sc.Err()
}

// stale says the rule carries a tag of a test process that is gone.
func stale(args []string) bool {
	for i, a := range args[:len(args)-1] {
		if a != "--comment" || !strings.HasPrefix(args[i+1], tagPrefix) {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimPrefix(args[i+1], tagPrefix))
		if err != nil {
			return false // not ours
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		// A test binary is NAME.test; a pid reused by anything else
		// means the tagger is gone.
		argv0, _, _ := bytes.Cut(cmdline, []byte{0})
		return err != nil || !bytes.HasSuffix(argv0, []byte(".test"))
	}
	return false
}

// iptables finds the iptables program: on PATH, or in the sbin
// directories a non-root PATH often lacks.
func iptables() (string, error) {
	if p, err := exec.LookPath("iptables"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/iptables", "/sbin/iptables"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no iptables program found (on PATH, /usr/sbin, /sbin): install it (Debian: apt-get install -y iptables); ./test.sh does")
}
