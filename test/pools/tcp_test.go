package pools

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/pool/datapath"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
)

// statefulRules let an SF forward a TCP connection only when it saw its
// SYN: the reply direction passes as ct state established, so it must
// come through the same SF.
const statefulRules = `table inet s9p {
	chain s9pfwd {
		type filter hook forward priority 0; policy drop;
		ct state established,related accept
		tcp dport 8080 ct state new accept
	}
}`

// TestPoolTCPReverseSameInstance: a bidirectional TCP chain through a pool
// of two stateful firewalls (conntrack, ct state established): the
// selectors at both headends (ingress and, for the reverse chain, egress)
// hash the canonical 5-tuple, so every connection's two directions meet
// the same SF and every connection completes.
func TestPoolTCPReverseSameInstance(t *testing.T) {
	le := labenv.New(t, labenv.Options{File: "testdata/bidi.yaml", Prefix: "s9t"})
	if _, err := le.Session(le.Domain).Apply(context.Background()); err != nil {
		t.Fatalf("apply: %v", err)
	}
	for _, n := range []string{"ingress", "egress"} {
		if sp, err := datapath.Specs(le.NS(n)); err != nil || len(sp) != 1 || !sp[0].Pool.Symmetric {
			t.Fatalf("%s: pools %+v (%v), want fw1's, symmetric", n, sp, err)
		}
	}
	for _, sf := range []string{"sf1", "sf2"} {
		testutil.Exec(t, le.NS(sf), "nft", statefulRules)
	}

	var ln net.Listener
	if err := nsutil.Do(le.NS("d"), func() error {
		var err error
		ln, err = net.Listen("tcp6", "[fc00:4d::d]:8080")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()

	const conns = 24
	errs := make([]error, conns)
	var wg sync.WaitGroup
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = nsutil.Do(le.NS("s"), func() error {
				d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: srcAddr.AsSlice(), Port: 41000 + i}}
				c, err := d.Dial("tcp6", "[fc00:4d::d]:8080")
				if err != nil {
					return err
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				msg := fmt.Sprintf("connection %d", i)
				if _, err := c.Write([]byte(msg)); err != nil {
					return err
				}
				b := make([]byte, len(msg))
				if _, err := io.ReadFull(c, b); err != nil {
					return err
				}
				if string(b) != msg {
					return fmt.Errorf("echo %q, want %q", b, msg)
				}
				return nil
			})
		}()
	}
	wg.Wait()
	failed := 0
	for i, err := range errs {
		if err != nil {
			failed++
			t.Errorf("connection from port %d: %v", 41000+i, err)
		}
	}
	// Both instances carried connections, in both directions.
	for _, n := range []string{"ingress", "egress"} {
		h, err := datapath.Reopen(le.NS(n))
		if err != nil {
			t.Fatal(err)
		}
		st, err := h.Stats(0, 2)
		h.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s's selector: packets per instance %v", n, st.Instances)
		if st.Instances[0] == 0 || st.Instances[1] == 0 {
			t.Errorf("%s's selector used one instance only: %v", n, st.Instances)
		}
	}
}
