package tcpproxy_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/tcpproxy"
)

// echoServer echoes every line back on 127.0.0.1 until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().String()
}

func startProxy(t *testing.T, target string) *tcpproxy.Proxy {
	t.Helper()
	p, err := tcpproxy.Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip sends a line and expects it back.
func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	// Write while reading: a large message would fill the socket buffers
	// and block a writer that reads only afterwards.
	wrote := make(chan error, 1)
	go func() {
		_, err := io.WriteString(c, msg+"\n")
		wrote <- err
	}()
	got, err := bufio.NewReader(c).ReadString('\n')
	if werr := <-wrote; werr != nil {
		t.Fatalf("write: %v", werr)
	}
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if got != msg+"\n" {
		t.Fatalf("echo = %q, want %q", got, msg+"\n")
	}
}

// expectClosed checks that a read on c ends promptly with EOF or an error,
// rather than blocking: the proxy closed the connection.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := c.Read(make([]byte, 1))
	if err == nil {
		t.Fatal("read succeeded on a cut connection")
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("connection still open 2s after Cut")
	}
}

func TestForwards(t *testing.T) {
	t.Parallel()
	p := startProxy(t, echoServer(t))
	if !strings.HasPrefix(p.Addr(), "127.0.0.1:") {
		t.Fatalf("Addr = %q, want 127.0.0.1:PORT", p.Addr())
	}
	a, b := dial(t, p.Addr()), dial(t, p.Addr())
	roundTrip(t, a, "hello")
	roundTrip(t, b, "world")
	roundTrip(t, a, strings.Repeat("x", 1<<20))
}

func TestCutAndRestore(t *testing.T) {
	t.Parallel()
	p := startProxy(t, echoServer(t))
	old := dial(t, p.Addr())
	roundTrip(t, old, "before")

	p.Cut()
	p.Cut() // idempotent
	expectClosed(t, old)

	// While cut, a new connection is accepted by the kernel but closed at
	// once by the proxy.
	refused := dial(t, p.Addr())
	io.WriteString(refused, "anyone?\n")
	expectClosed(t, refused)

	p.Restore()
	roundTrip(t, dial(t, p.Addr()), "after")
	// Connections cut earlier stay cut.
	expectClosed(t, old)
}

func TestHalfClose(t *testing.T) {
	t.Parallel()
	p := startProxy(t, echoServer(t))
	c := dial(t, p.Addr()).(*net.TCPConn)
	c.SetDeadline(time.Now().Add(2 * time.Second))
	io.WriteString(c, "last words")
	// The client is done writing but still wants the reply.
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "last words" {
		t.Fatalf("got %q after half-close", got)
	}
}

func TestTargetDown(t *testing.T) {
	t.Parallel()
	// A port with nothing listening: take one and free it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := l.Addr().String()
	l.Close()

	p := startProxy(t, target)
	expectClosed(t, dial(t, p.Addr()))
}

func TestClose(t *testing.T) {
	t.Parallel()
	p, err := tcpproxy.Start(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	roundTrip(t, c, "hi")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c)
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if c, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		c.Close()
		t.Fatal("proxy still listens after Close")
	}
}

func TestFreezeAndThaw(t *testing.T) {
	t.Parallel()
	p := startProxy(t, echoServer(t))
	c := dial(t, p.Addr())
	roundTrip(t, c, "before")

	p.Freeze()
	io.WriteString(c, "held\n")
	// Nothing comes back while frozen, and the connection stays open.
	c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	r := bufio.NewReader(c)
	if got, err := r.ReadString('\n'); err == nil {
		t.Fatalf("read %q through a frozen proxy", got)
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("frozen read: %v, want a timeout", err)
	}

	p.Thaw()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "held\n" {
		t.Fatalf("after thaw: %q, %v; want the held bytes", got, err)
	}
	roundTrip(t, c, "after")
}

// Delay holds every byte for the delay in each direction, as a slow or
// distant store would: a round trip takes twice the delay. It is latency,
// not a narrower pipe: lines sent together come back together.
func TestDelay(t *testing.T) {
	t.Parallel()
	const delay = 300 * time.Millisecond
	p := startProxy(t, echoServer(t))
	c := dial(t, p.Addr())
	r := bufio.NewReader(c)
	roundTrip(t, c, "before")

	p.Delay(delay)
	c.SetDeadline(time.Now().Add(20 * time.Second))
	start := time.Now()
	// Ten lines, each written on its own, 20 ms apart.
	for i := range 10 {
		fmt.Fprintf(c, "line %d\n", i)
		time.Sleep(20 * time.Millisecond)
	}
	for i := range 10 {
		got, err := r.ReadString('\n')
		if err != nil || got != fmt.Sprintf("line %d\n", i) {
			t.Fatalf("delayed echo %d: %q, %v", i, got, err)
		}
		if i == 0 {
			if took := time.Since(start); took < 2*delay {
				t.Errorf("the first echo came back after %s, want at least %s (the delay each way)", took, 2*delay)
			}
		}
	}
	// Held one after another, ten lines would take ten round trips.
	if took := time.Since(start); took > 10*delay {
		t.Errorf("ten lines came back after %s: the delay held each line after the one before", took)
	}

	p.Delay(0)
	start = time.Now()
	roundTrip(t, c, "after")
	if took := time.Since(start); took >= 2*delay {
		t.Errorf("a round trip after Delay(0) took %s", took)
	}
	// New connections are delayed too.
	p.Delay(delay)
	start = time.Now()
	roundTrip(t, dial(t, p.Addr()), "new")
	if took := time.Since(start); took < 2*delay {
		t.Errorf("a new connection's round trip took %s, want at least %s", took, 2*delay)
	}
}
