package e2e

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/controller"
	"github.com/segchain/segchain/internal/dataplane/firewall"
	"github.com/segchain/segchain/internal/dataplane/netfilter"
	"github.com/segchain/segchain/internal/dataplane/srunaware"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/testutil"
)

// TestSameNodeServicePairs runs ordered pairs of service kinds back to
// back on one node, each chain on its own UDP port (testdata/samenode.yaml):
// native → native (End, End.X, End.T, and the decapsulating End.DT6 and
// End.DX6 as second), native → eBPF, eBPF → native and eBPF → eBPF (End.AD,
// End.AS, End.AM, End.AN.FW, End.AN.NF), and a chain of four. Every packet
// must arrive, and the counters of BOTH SIDs of the pair must have counted
// them.
//
// Before the service loop every chain whose second SID is served by a tc
// program lost every packet (issue 12, finding 5). Before native SIDs after
// native SIDs were routed on the loop instead of lo, End → End, End →
// End.X, End → End.T, End.T → End, End → End.DT6 and End → End.DX6 lost
// every packet, the second SID counting nothing (issue 25, item 1): the
// kernel's next-hop lookup after End ignores routes via a loopback device.
func TestSameNodeServicePairs(t *testing.T) {
	testutil.RequireTool(t, "python3")
	e := setup(t, "testdata/samenode.yaml")
	nfv1 := e.NS("nfv1")
	t.Cleanup(func() { _ = srunaware.Remove(nfv1); _ = firewall.Flush(nfv1); _ = netfilter.Flush(nfv1) })
	// First as an older segchain left the node: every SID on lo. Then
	// the apply that moves the kernel-served SIDs after another SID of
	// their node onto the loop: each is replaced in place (one "~ route"
	// op, no delete), without loss for a chain that reaches one of them
	// (nfv1-end, also second in End.T -> End) from another node.
	old := e.Session(e.d)
	var moved []string
	for name, n := range old.Plan.Nodes {
		for i, r := range n.Routes {
			if r.Seg6Local != nil && r.Dev == nodestate.LoopDev {
				n.Routes[i].Dev = ""
				moved = append(moved, name+" "+r.Dst.String())
			}
		}
	}
	if len(moved) == 0 {
		t.Fatal("the plan puts no kernel-served SID on the service loop")
	}
	if _, err := old.Apply(t.Context()); err != nil {
		t.Fatal(err)
	}
	// At least 6 s of stream (longer while the apply, journaled and
	// locked like segchain apply's, still runs: testutil.Stream).
	var res *controller.Result
	if r := stream(t, e, 7001, 3000, 500, func() { res = e.apply() }); r.Lost != 0 || r.Unique != r.Sent || r.Duplicates != 0 {
		t.Errorf("migrating the SIDs from lo to the loop under a stream: %d sent, %d arrived (%d lost), %d duplicated", r.Sent, r.Unique, r.Lost, r.Duplicates)
	}
	var ops []string
	for _, d := range res.Diffs {
		for _, op := range d.Ops() {
			if op.Kind == agent.KindRoute && op.Route.Seg6Local != nil {
				ops = append(ops, d.Node+" "+op.Route.Dst.String()+" "+strings.SplitN(op.String(), " ", 2)[0])
			}
		}
	}
	var want []string
	for _, m := range moved {
		want = append(want, m+" ~")
	}
	slices.Sort(want)
	slices.Sort(ops)
	if diff := cmp.Diff(want, ops); diff != "" {
		t.Errorf("seg6local ops of the migration (-want +got):\n%s", diff)
	}
	if res := e.apply(); res.Changes() != 0 {
		t.Errorf("apply after the migration made %d changes: %+v", res.Changes(), res.Diffs)
	}
	// egress names a chain's egress SID ("<chain> egress" in the plan).
	sidOf := func(t *testing.T, name string) netip.Addr {
		t.Helper()
		if c, ok := strings.CutSuffix(name, " egress"); ok {
			for _, s := range e.ctl.Plan.SIDs {
				if s.Service == c+" egress" {
					return s.SID.Addr()
				}
			}
			t.Fatalf("no egress SID for chain %s", c)
		}
		return e.sid(name)
	}
	for _, c := range []struct {
		chain         string
		port          int
		first, second string // services (or "<chain> egress") whose SIDs must count
		node2         string // node of second ("" = nfv1)
	}{
		{"End -> End.AN.FW", 7001, "nfv1-end", "nfv1-an", ""},
		{"End -> End.AD", 7002, "nfv1-end", "nfv1-px1", ""},
		{"End.AD -> End", 7003, "nfv1-px1", "nfv1-end", ""},
		{"End.AN.FW -> End", 7004, "nfv1-an", "nfv1-end", ""},
		{"End.AN.FW -> End.AD", 7005, "nfv1-an", "nfv1-px1", ""},
		{"End.AD -> End.AN.FW", 7006, "nfv1-px1", "nfv1-an", ""},
		{"End.AD -> End.AD", 7007, "nfv1-px1", "nfv1-px2", ""},
		{"End -> End.AN.FW -> End.AD -> End.AD", 7008, "nfv1-end", "nfv1-px1", ""},
		{"End -> End", 7009, "nfv1-end", "nfv1-end2", ""},
		{"End -> End.X", 7010, "nfv1-end", "nfv1-endx", ""},
		{"End -> End.T", 7011, "nfv1-end", "nfv1-endt", ""},
		{"End.T -> End", 7012, "nfv1-endt", "nfv1-end", ""},
		{"End -> End.DT6", 7013, "nfv1-end", "end-dt6 egress", ""},
		{"End -> End.DX6 (egress node)", 7014, "egress-end", "end-egressend egress", "egress"},
		{"End -> End.AS", 7015, "nfv1-end", "nfv1-as", ""},
		{"End -> End.AM", 7016, "nfv1-end", "nfv1-am", ""},
		{"End.AM -> End", 7017, "nfv1-am", "nfv1-end", ""},
		{"End -> End.AN.NF", 7018, "nfv1-end", "nfv1-nf", ""},
		{"End.AN.NF -> End", 7019, "nfv1-nf", "nfv1-end", ""},
		{"End.AN.NF -> End.AD", 7020, "nfv1-nf", "nfv1-px1", ""},
		{"End.AD -> End.AN.NF", 7021, "nfv1-px1", "nfv1-nf", ""},
		{"End.B6.Encaps -> End (its policy's first segment)", 7022, "nfv1-b6", "nfv1-end3", ""},
	} {
		t.Run(c.chain, func(t *testing.T) {
			const n = 200
			node1, node2 := "nfv1", "nfv1"
			if c.node2 != "" {
				node1, node2 = c.node2, c.node2
			}
			s1, s2 := sidOf(t, c.first), sidOf(t, c.second)
			b1, b2 := e.counters(node1, s1).Packets, e.counters(node2, s2).Packets
			r := stream(t, e, c.port, n, 500, nil)
			if r.Unique != n || r.Duplicates != 0 {
				t.Errorf("%d sent: %d arrived, %d duplicated", n, r.Unique, r.Duplicates)
			}
			for _, x := range []struct {
				name, node string
				sid        netip.Addr
				before     uint64
			}{{c.first, node1, s1, b1}, {c.second, node2, s2, b2}} {
				if got := e.counters(x.node, x.sid).Packets - x.before; got < n {
					t.Errorf("%s (%s on %s) counted %d packets of %d", x.name, x.sid, x.node, got, n)
				}
			}
		})
	}
	t.Run("destroy removes the service loop", func(t *testing.T) {
		if _, err := e.ctl.Destroy(t.Context()); err != nil {
			t.Fatal(err)
		}
		for _, node := range []string{"nfv1", "egress"} {
			if out, err := testutil.ExecErr(e.NS(node), "ip", "link", "show", "sc-svcloop"); err == nil {
				t.Errorf("service loop left on %s after destroy:\n%s", node, out)
			}
		}
	})
}
