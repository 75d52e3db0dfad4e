// Package tcpproxy forwards TCP connections on loopback so tests can cut them.
//
// Chaos tests put a Proxy between a client and its server (baton and
// PostgreSQL) and call Cut to make the network fail under the client: every
// forwarded connection is closed and new ones are closed as soon as they are
// accepted, until Restore. A cut looks to the client like a server that went
// away, which is what a client must survive; the server sees its client
// disconnect.
//
// Freeze is the other failure: a server that hangs (stopped, or a network
// that drops every packet). Connections stay open and no byte passes either
// way until Thaw; a client notices only through its own timeouts.
//
// Delay makes the server slow instead: every byte is held for the delay in
// each direction, so each statement of a database client waits twice the
// delay for its answer, as across a congested or distant network. It is
// latency, not a narrower pipe: bytes sent together arrive together.
package tcpproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// dialTimeout bounds the connection to the target, so a dead target makes the
// client's connection fail instead of hang.
const dialTimeout = 5 * time.Second

// Proxy accepts connections on 127.0.0.1 and forwards each to its target.
type Proxy struct {
	listener net.Listener
	target   string

	mu     sync.Mutex
	thawed *sync.Cond // broadcast on Thaw and Close
	cut    bool
	frozen bool
	delay  time.Duration
	closed bool
	conns  map[net.Conn]struct{} // both ends of every forwarded connection

	wg sync.WaitGroup // the accept loop and every forwarding goroutine
}

// Start listens on 127.0.0.1:0 and forwards every accepted connection to
// target ("host:port").
func Start(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{listener: l, target: target, conns: make(map[net.Conn]struct{})}
	p.thawed = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr returns the address clients dial instead of the target:
// "127.0.0.1:PORT".
func (p *Proxy) Addr() string {
	return p.listener.Addr().String()
}

// Cut closes every forwarded connection and makes the proxy close new ones as
// soon as it accepts them, until Restore. Cutting a cut proxy does nothing.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	p.closeAllLocked()
}

// Restore makes the proxy forward new connections again. Connections closed
// by Cut stay closed: clients must reconnect.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Freeze holds every byte on every connection, forwarded or new, without
// closing any, until Thaw.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = true
}

// Thaw forwards again, first the bytes held while frozen.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = false
	p.thawed.Broadcast()
}

// Delay holds every byte forwarded from now on, on every connection,
// forwarded or new, for d in each direction; 0 forwards at once again.
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

func (p *Proxy) delayed() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delay
}

// Close stops listening, closes every forwarded connection and waits for the
// proxy's goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.thawed.Broadcast()
	err := p.listener.Close()
	p.closeAllLocked()
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) closeAllLocked() {
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		client, err := p.listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary failures (EMFILE under a connection storm) must not
			// end the proxy; back off briefly instead of spinning.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.mu.Lock()
		refuse := p.cut || p.closed
		p.mu.Unlock()
		if refuse {
			client.Close()
			continue
		}
		p.wg.Add(1)
		go p.forward(client)
	}
}

// forward connects client to the target and copies both ways until either
// side closes or the proxy closes them.
func (p *Proxy) forward(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.target, dialTimeout)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(client, server) {
		// Cut or closed while we were dialing.
		client.Close()
		server.Close()
		return
	}
	defer p.untrack(client, server)

	done := make(chan struct{}, 2)
	go func() { p.pipe(server, p.gate(client)); done <- struct{}{} }()
	go func() { p.pipe(client, p.gate(server)); done <- struct{}{} }()
	<-done
	<-done
}

// pipe copies src to dst, each chunk once the proxy's delay has passed
// since it was read. A reader goroutine goes on reading while the writer
// waits, so that the delay is latency, not a limit on throughput. When src
// ends cleanly it passes the half-close on, so a client that shuts down its
// write side still reads the reply; on an error both connections are
// closed, which also ends the copy the other way.
func (p *Proxy) pipe(dst net.Conn, src gated) {
	type chunk struct {
		b    []byte
		read time.Time
	}
	chunks := make(chan chunk, 64)
	var readErr error
	go func() {
		defer close(chunks)
		for {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			if n > 0 {
				chunks <- chunk{b[:n], time.Now()}
			}
			if err != nil {
				if err != io.EOF {
					readErr = err
				}
				return
			}
		}
	}()
	var writeErr error
	for c := range chunks {
		if writeErr != nil {
			continue // draining until the reader sees the close
		}
		time.Sleep(time.Until(c.read.Add(p.delayed())))
		if _, writeErr = dst.Write(c.b); writeErr != nil {
			dst.Close()
			src.Close()
		}
	}
	if readErr == nil && writeErr == nil {
		if tc, ok := dst.(*net.TCPConn); ok {
			if tc.CloseWrite() == nil {
				return
			}
		}
	}
	dst.Close()
	src.Close()
}

// gate is src whose reads return only while the proxy is not frozen.
func (p *Proxy) gate(src net.Conn) gated { return gated{src, p} }

type gated struct {
	net.Conn
	p *Proxy
}

func (g gated) Read(b []byte) (int, error) {
	n, err := g.Conn.Read(b)
	g.p.mu.Lock()
	for g.p.frozen && !g.p.closed {
		g.p.thawed.Wait()
	}
	g.p.mu.Unlock()
	return n, err
}

func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut || p.closed {
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(p.conns, c)
	}
}
