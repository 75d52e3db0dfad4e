package netcut_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/netcut"
)

// testUID is the user the cut client runs as: no account has it, and no
// other test uses it.
const testUID = 64190

// The test binary runs as the client: it connects to NETCUT_ADDR once and,
// for each line of stdin, sends a line and says whether its echo came back
// within a second.
func TestMain(m *testing.M) {
	if addr := os.Getenv("NETCUT_ADDR"); addr != "" {
		os.Exit(client(addr))
	}
	os.Exit(m.Run())
}

func client(addr string) int {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	r := bufio.NewReader(c)
	for in := bufio.NewScanner(os.Stdin); in.Scan(); {
		c.SetDeadline(time.Now().Add(time.Second))
		if _, err := io.WriteString(c, in.Text()+"\n"); err != nil {
			fmt.Println("write:", err)
			continue
		}
		line, err := r.ReadString('\n')
		if err != nil {
			fmt.Println("no echo")
			continue
		}
		fmt.Println("echo", strings.TrimSpace(line))
	}
	return 0
}

// echo serves lines back on 127.0.0.1 and counts the lines it received.
func echo(t *testing.T) (port int, received *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	received = new(atomic.Int64)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					received.Add(1)
					fmt.Fprintln(c, sc.Text())
				}
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port, received
}

// clientProc is the client, as uid or as the tests' own user (uid < 0).
type clientProc struct {
	in  io.WriteCloser
	out *bufio.Scanner
}

func startClient(t *testing.T, port, uid int) *clientProc {
	t.Helper()
	cmd := exec.Command(reachable(t))
	cmd.Env = append(os.Environ(), fmt.Sprintf("NETCUT_ADDR=127.0.0.1:%d", port))
	if uid >= 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
		cmd.Dir = "/"
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	return &clientProc{in: in, out: bufio.NewScanner(out)}
}

// reachable is a copy of the test binary that other users can run (the
// go tool builds it in a directory closed to them).
func reachable(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "netcut-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "netcut.test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// say sends msg and returns what the client saw.
func (c *clientProc) say(t *testing.T, msg string) string {
	t.Helper()
	fmt.Fprintln(c.in, msg)
	if !c.out.Scan() {
		t.Fatalf("the client ended: %v", c.out.Err())
	}
	return c.out.Text()
}

// Each direction drops what it says, on the cut user's connection only;
// a heal lets the connection go on, with what was held retransmitted.
func TestPartition(t *testing.T) {
	for _, c := range []struct {
		dir     netcut.Direction
		arrives bool // the cut user's line reaches the server
	}{
		{netcut.Requests, false},
		{netcut.Replies, true},
		{netcut.Both, false},
	} {
		t.Run(c.dir.String(), func(t *testing.T) {
			port, received := echo(t)
			p := netcut.New(t, testUID, port)
			cut := startClient(t, port, testUID)
			other := startClient(t, port, -1)
			if got := cut.say(t, "before"); got != "echo before" {
				t.Fatalf("before the cut: %q", got)
			}
			p.Cut(c.dir)
			n := received.Load()
			if got := cut.say(t, "during"); got != "no echo" {
				t.Errorf("during the cut (%s): the cut user's client saw %q, want no echo", c.dir, got)
			}
			if got := other.say(t, "other"); got != "echo other" {
				t.Errorf("during the cut (%s): another user's client saw %q", c.dir, got)
			}
			// The other client's line, and the cut one's if it arrives.
			want := n + 1
			if c.arrives {
				want++
			}
			if got := received.Load(); got != want {
				t.Errorf("during the cut (%s): the server received %d lines, want %d", c.dir, got-n, want-n)
			}
			p.Heal()
			// TCP retransmits what was dropped, after a backoff: the
			// held echo comes first, then this one's.
			deadline := time.Now().Add(30 * time.Second)
			for got := ""; got != "echo after"; got = cut.say(t, "after") {
				if time.Now().After(deadline) {
					t.Fatalf("after the heal (%s): no echo within 30 s", c.dir)
				}
			}
		})
	}
}

// A test binary that dies without its cleanup leaves its rules behind;
// the next partition removes them, and leaves a running test's alone.
func TestNewSweepsRulesOfGoneProcesses(t *testing.T) {
	port, _ := echo(t)
	// A process that exits at once: its pid is a gone tagger.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	rule := func(pid int) []string {
		return []string{"OUTPUT", "-o", "lo", "-p", "tcp", "--dport", fmt.Sprint(port),
			"-m", "comment", "--comment", fmt.Sprintf("baton-test-%d", pid), "-j", "DROP"}
	}
	iptables := func(op string, rule []string) error {
		return exec.Command("iptables", append([]string{"-w", op}, rule...)...).Run()
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (iptables); the tests run as root in CI")
	}
	for _, pid := range []int{gone.Process.Pid, os.Getpid()} {
		if err := iptables("-I", rule(pid)); err != nil {
			t.Fatalf("iptables -I: %v (is iptables installed?)", err)
		}
	}
	t.Cleanup(func() { iptables("-D", rule(os.Getpid())) })
	netcut.New(t, testUID, port)
	if iptables("-C", rule(gone.Process.Pid)) == nil {
		t.Errorf("the rule of a gone process (pid %d) is still there", gone.Process.Pid)
		iptables("-D", rule(gone.Process.Pid))
	}
	if iptables("-C", rule(os.Getpid())) != nil {
		t.Errorf("the rule of a running test process was removed")
	}
}
