package pools

import (
	"context"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/pool/datapath"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
)

// bulkRules are statefulRules for a server on any port: a connection
// opens with a SYN through one SF, and its replies pass only that SF.
const bulkRules = `table inet s14b {
	chain s14bfwd {
		type filter hook forward priority 0; policy drop;
		ct state established,related accept
		tcp flags & (syn | ack) == syn ct state new accept
	}
}`

// TestPoolBulkTCP: bulk TCP through a pool of two stateful firewalls,
// with the offloads a Linux host has by default on veth (TSO/GSO) and GRO
// on the headend's host-facing interface, so pool_in classifies and marks
// 64 KB aggregated packets and the kernel encapsulates them as GSO
// packets (the lab's fabric links have MTU 9000, the host's 1500). Every
// byte of every connection arrives intact, both instances carry
// connections, and the selector drops nothing; the same for connections
// the headend itself opens into the chain.
func TestPoolBulkTCP(t *testing.T) {
	testutil.RequireTool(t, "ethtool")
	le := labenv.New(t, labenv.Options{File: "testdata/bidi.yaml", Prefix: "s14b"})
	if _, err := le.Session(le.Domain).Apply(context.Background()); err != nil {
		t.Fatalf("apply: %v", err)
	}
	for _, sf := range []string{"sf1", "sf2"} {
		testutil.Exec(t, le.NS(sf), "nft", bulkRules)
	}
	testutil.Exec(t, le.NS("s"), "ethtool", "-K", "eth-ingress", "tso", "on", "gso", "on")
	testutil.Exec(t, le.NS("ingress"), "ethtool", "-K", "eth-s", "gro", "on")
	h, err := datapath.Reopen(le.NS("ingress"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })

	// The headend's own address on the hosts' link: its connections are
	// chain traffic too (the chain matches the source), selected at
	// egress by pool_out as 64 KB GSO packets.
	local := addrOn(t, le.NS("ingress"), "eth-s").String()
	// Their replies come back by the reverse chain, whose End.DT6 looks
	// up table main alone: apply put a local route for the headend's
	// address there (docs/behaviors.md, End.DT6).
	for _, c := range []struct{ name, ns, from string }{
		{"forwarded", le.NS("s"), ""},
		{"local", le.NS("ingress"), local},
	} {
		t.Run(c.name, func(t *testing.T) {
			base, err := h.Stats(0, 2)
			if err != nil {
				t.Fatal(err)
			}
			const size = 2 << 20
			var st datapath.Stats
			for conn := 1; ; conn++ {
				if err := testutil.BulkTCPFrom(t, c.ns, c.from, le.NS("d"), "fc00:4d::d", 0, size, 20*time.Second); err != nil {
					t.Fatalf("connection %d: %v", conn, err)
				}
				if st, err = h.Stats(0, 2); err != nil {
					t.Fatal(err)
				}
				if st.Instances[0] > base.Instances[0] && st.Instances[1] > base.Instances[1] {
					t.Logf("%d connections, selector counters %+v (before %v)", conn, st, base.Instances)
					break
				}
				// Each connection picks an instance by its hash: twelve
				// connections all on one of two instances is a 1 in 2,048
				// chance.
				if conn == 12 {
					t.Fatalf("12 connections all on one instance: %+v (before %v)", st, base.Instances)
				}
			}
			if st.Drop != 0 || st.Errors != 0 || len(st.Drops) != 0 {
				t.Errorf("the selector dropped or failed packets: %+v", st)
			}
		})
	}
}
