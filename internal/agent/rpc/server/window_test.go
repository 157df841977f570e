package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/segchain/segchain/internal/agent/rpc/client"
	"github.com/segchain/segchain/internal/nodestate"
)

// recConn keeps what an agent's connection read and wrote.
type recConn struct {
	net.Conn
	mu      sync.Mutex
	in, out bytes.Buffer
	once    sync.Once
	closed  chan struct{}
}

func (c *recConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	c.in.Write(b[:n])
	c.mu.Unlock()
	return n, err
}

func (c *recConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.mu.Lock()
	c.out.Write(b[:n])
	c.mu.Unlock()
	return n, err
}

func (c *recConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

type recListener struct {
	net.Listener
	conns chan *recConn
}

func (l recListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	rc := &recConn{Conn: c, closed: make(chan struct{})}
	l.conns <- rc
	return rc, nil
}

// pings counts the PING frames (not their acks) in an HTTP/2 byte stream.
func pings(t *testing.T, b []byte) int {
	t.Helper()
	fr := http2.NewFramer(nil, bytes.NewReader(b))
	n := 0
	for {
		f, err := fr.ReadFrame()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return n
		}
		if err != nil {
			t.Fatalf("HTTP/2 frames: %v", err)
		}
		if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
			n++
		}
	}
}

// A controller's call costs no bandwidth-estimating PING either way
// (rpc.Window fixes both ends' windows): each would be one more frame,
// write and wake-up per agent per command.
func TestNoPingsPerCall(t *testing.T) {
	e := &env{fake: newFake(), log: &bytes.Buffer{}}
	srv := NewServer(e.fake, nil, Build{}, nil, Hooks{})
	g := NewGRPCServer(srv, nil, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rl := recListener{lis, make(chan *recConn, 4)}
	go g.Serve(rl)
	t.Cleanup(g.Stop)

	c, err := client.Dial("nfv1", lis.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetTimeout(10 * time.Second)
	want := &nodestate.Node{Name: "nfv1"}
	if _, err := c.ObserveDigest(context.Background(), want, "", true); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var rc *recConn
	select {
	case rc = <-rl.conns:
	case <-time.After(time.Minute):
		t.Fatal("no connection accepted")
	}
	select {
	case <-rc.closed:
	case <-time.After(time.Minute):
		t.Fatal("the agent never closed the connection after the controller did")
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	in := rc.in.Bytes()
	if !bytes.HasPrefix(in, []byte(http2.ClientPreface)) {
		t.Fatalf("no HTTP/2 preface from the controller: %q", in[:min(len(in), 24)])
	}
	if n := pings(t, in[len(http2.ClientPreface):]); n != 0 {
		t.Errorf("the controller sent %d PING(s), want 0", n)
	}
	if n := pings(t, rc.out.Bytes()); n != 0 {
		t.Errorf("the agent sent %d PING(s), want 0", n)
	}
}

// A connection's buffers are small: the controller dials every agent on
// every command (a thousand connections a no-op), and grpc-go's default
// 32 KiB read and 32 KiB write buffer per connection and side were
// allocated and zeroed for messages of a few hundred bytes. Bytes
// allocated per connection and call, both sides in this process.
func TestConnectionBuffersSmall(t *testing.T) {
	if testing.Short() {
		// make race's unit step: the race detector's own allocations
		// (127 KiB a call there) say nothing about grpc-go's buffers.
		t.Skip("-short: an allocation count, measured in make test's main step")
	}
	e := &env{fake: newFake(), log: &bytes.Buffer{}}
	g := NewGRPCServer(NewServer(e.fake, nil, Build{}, nil, Hooks{}), nil, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	want := &nodestate.Node{Name: "nfv1"}
	call := func() {
		c, err := client.Dial("nfv1", lis.Addr().String(), nil)
		if err != nil {
			t.Fatal(err)
		}
		c.SetTimeout(10 * time.Second)
		if _, err := c.ObserveDigest(context.Background(), want, "", false); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	call() // grpc-go's and the fake's one-time set-up
	const n = 20
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for i := 0; i < n; i++ {
		call()
	}
	runtime.ReadMemStats(&m1)
	per := (m1.TotalAlloc - m0.TotalAlloc) / n
	t.Logf("%d KiB allocated per connection and call", per>>10)
	if per > 96<<10 {
		t.Fatalf("%d KiB allocated per connection and call, want at most 96 (grpc-go's default buffers alone are 128)", per>>10)
	}
}
