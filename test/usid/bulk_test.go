package usid

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/dataplane/netfilter"
	"github.com/segchain/segchain/internal/dataplane/srunaware"
	"github.com/segchain/segchain/internal/nsutil"
)

// bulkBytes is enough for the hosts' TCP to build 64 KB GSO packets (veth
// offloads on, as a Linux host has them) and for GRO to aggregate them on
// the way.
const bulkBytes = 4 << 20

// bulkTCP sends n bytes from host s to d (fc00:4d::d, port; 0: any) and
// checks d got them intact (SHA-256) within timeout.
func bulkTCP(t *testing.T, l *lab, port, n int, timeout time.Duration) error {
	t.Helper()
	var ln net.Listener
	if err := nsutil.Do(l.NS("d"), func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort("fc00:4d::d", fmt.Sprint(port)))
		return err
	}); err != nil {
		t.Fatalf("listen at d: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	port = ln.Addr().(*net.TCPAddr).Port
	payload := bytes.Repeat([]byte("segchain usid bulk 0123456789\n"), n/30+1)[:n]
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
		r := result{n: m, err: err}
		copy(r.sum[:], h.Sum(nil))
		got <- r
	}()
	var c net.Conn
	if err := nsutil.Do(l.NS("s"), func() (err error) {
		d := net.Dialer{Timeout: 5 * time.Second}
		c, err = d.Dial("tcp", net.JoinHostPort("fc00:4d::d", fmt.Sprint(port)))
		return err
	}); err != nil {
		return fmt.Errorf("dial from s: %w", err)
	}
	go func() {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(timeout))
		_, _ = c.Write(payload)
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	select {
	case r := <-got:
		if r.err != nil || r.n != int64(n) || r.sum != want {
			return fmt.Errorf("d got %d of %d bytes (intact: %v), err %v", r.n, n, r.sum == want, r.err)
		}
		return nil
	case <-time.After(timeout + 2*time.Second):
		return fmt.Errorf("no result after %v", timeout)
	}
}

// TestBulkTCPThroughUSIDServices: bulk TCP of host s (GSO-sized segments,
// 1500-byte host links, the lab's 9000-byte fabric) through a chain whose
// SR proxy (End.AD, examples/default.yaml's chain firewalled, TCP 8080)
// or End.AN.NF (examples/netfilter.yaml unpinned) holds a uSID in the
// middle of the chain's one container: every byte arrives intact and the
// service drops nothing.
func TestBulkTCPThroughUSIDServices(t *testing.T) {
	t.Run("End.AD", func(t *testing.T) {
		l := up(t, "../../examples/default.yaml", config.SIDFormatF3216)
		if err := bulkTCP(t, l, 8080, bulkBytes, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		n, err := srunaware.Open(l.NS("nfv1"))
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		sts, err := n.Show()
		if err != nil {
			t.Fatal(err)
		}
		var out uint64
		for _, s := range sts {
			if s.Spec.CSIDNFLen == 0 {
				t.Errorf("proxy %+v is not a uSID proxy", s.Spec)
			}
			out += s.Counters.OutPackets
			if len(s.Counters.Drops) != 0 {
				t.Errorf("proxy %d dropped: %v", s.ID, s.Counters.Drops)
			}
		}
		if out == 0 {
			t.Error("nothing went through the proxy")
		}
	})
	t.Run("End.AN.NF", func(t *testing.T) {
		l := up(t, "../../examples/netfilter.yaml", config.SIDFormatF3216, unpinned(t))
		if err := bulkTCP(t, l, 0, bulkBytes, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		sts, err := netfilter.List(l.NS("nfv2"))
		if err != nil {
			t.Fatal(err)
		}
		var accepted uint64
		for _, s := range sts {
			accepted += s.Counters.Accepted
			var drops []string
			for k, v := range s.Counters.Drops {
				if v != 0 {
					drops = append(drops, fmt.Sprintf("%s %d", k, v))
				}
			}
			if len(drops) != 0 {
				t.Errorf("End.AN.NF %d dropped: %s", s.ID, strings.Join(drops, ", "))
			}
		}
		if accepted == 0 {
			t.Error("nothing went through End.AN.NF")
		}
	})
}
