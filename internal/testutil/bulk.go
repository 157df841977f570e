package testutil

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/nsutil"
)

// BulkTCP sends n bytes over TCP from namespace cl to addr:port (0: any
// free port) in namespace srv and checks the server received them
// intact (SHA-256), within timeout.
func BulkTCP(t testing.TB, cl, srv, addr string, port, n int, timeout time.Duration) error {
	t.Helper()
	return BulkTCPFrom(t, cl, "", srv, addr, port, n, timeout)
}

// BulkTCPFrom is BulkTCP with the client bound to source address from
// ("": the kernel's choice), for traffic a chain selects by its source.
func BulkTCPFrom(t testing.TB, cl, from, srv, addr string, port, n int, timeout time.Duration) error {
	t.Helper()
	var ln net.Listener
	err := nsutil.Do(srv, func() error {
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort(addr, fmt.Sprint(port)))
		return err
	})
	if err != nil {
		t.Fatalf("listen in %s: %v", srv, err)
	}
	t.Cleanup(func() { ln.Close() })
	port = ln.Addr().(*net.TCPAddr).Port
	payload := bytes.Repeat([]byte("segchain bulk 0123456789abcdef\n"), n/31+1)[:n]
	want := sha256.Sum256(payload)
	type result struct {
		n   int64
		sum [32]byte
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- result{err: err}
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(timeout))
		h := sha256.New()
		m, err := io.Copy(h, c)
		var r result
		r.n, r.err = m, err
		copy(r.sum[:], h.Sum(nil))
		got <- r
	}()
	start := time.Now()
	var sendErr error
	err = nsutil.Do(cl, func() error {
		d := net.Dialer{Timeout: 5 * time.Second}
		if from != "" {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
		}
		c, err := d.Dial("tcp", net.JoinHostPort(addr, fmt.Sprint(port)))
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(timeout))
			_, sendErr = c.Write(payload)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
		}()
		return nil
	})
	if err != nil {
		return fmt.Errorf("dial from %s: %w", cl, err)
	}
	select {
	case r := <-got:
		if r.err != nil || r.n != int64(n) || r.sum != want {
			return fmt.Errorf("bulk TCP: server got %d of %d bytes (intact: %v) in %v, err %v, sender err %v",
				r.n, n, r.sum == want, time.Since(start).Round(time.Millisecond), r.err, sendErr)
		}
		t.Logf("bulk TCP: %d bytes intact in %v", n, time.Since(start).Round(time.Millisecond))
		return nil
	case <-time.After(timeout + 2*time.Second):
		return fmt.Errorf("bulk TCP: no result after %v", timeout)
	}
}
