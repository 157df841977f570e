package main

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/chainpath"
	"github.com/segchain/segchain/internal/controller"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/plan"
)

// TestPrintStatusBoundaryAndDetail: status prints an eBPF SID's detail
// line and the boundary drops per node, interface, direction and reason.
func TestPrintStatusBoundaryAndDetail(t *testing.T) {
	st := &controller.Status{Domain: "t", Nodes: []controller.NodeStatus{
		{Node: "nfv1", SIDs: []controller.SIDStatus{{SIDCounters: agent.SIDCounters{
			SID: netip.MustParsePrefix("fc00:2::b324:0/128"), Behavior: "End.AM", Owned: true, Counted: true,
			Packets: 19, Errors: 1, Detail: map[string]uint64{"in-packets": 10, "out-packets": 9, "in-drops": 0, "out-drops": 1, "drop-cache-empty": 1}},
			Service: "am"}}},
		{Node: "ingress", Boundary: []nodestate.BoundaryCounter{{Iface: "eth-s", Direction: "in", Reason: "sid-space-srh", Packets: 20, Bytes: 2400}}},
	}}
	var b bytes.Buffer
	printStatus(&b, st, false)
	out := b.String()
	for _, want := range []string{
		"in 10 out 9 drops in 0 out 1: cache-empty 1",
		"BOUNDARY NODE",
		"ingress        eth-s  in   sid-space-srh  20",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	printStatus(&b, &controller.Status{Domain: "t"}, false)
	if !strings.Contains(b.String(), "boundary: no drops") {
		t.Errorf("no drops not said:\n%s", b.String())
	}
	b.Reset()
	printWarnings(&b, []string{"security.boundary.off: boundary filtering is off"})
	if b.String() != "warning: security.boundary.off: boundary filtering is off\n" {
		t.Errorf("warnings: %q", b.String())
	}
}

// TestPrintStatusPath: status prints each chain's path on one line with
// its problems below.
func TestPrintStatusPath(t *testing.T) {
	sid := netip.MustParseAddr("fc00:4::d6")
	st := &controller.Status{Domain: "t", Chains: []controller.ChainStatus{{
		Chain: plan.Chain{Name: "web", Ingress: "ingress"},
		Path: []chainpath.Segment{{SID: sid, Node: "egress", Behavior: "End.DX6",
			Hops: [][]string{{"ingress", "r1", "nfv1", "egress"}, {"ingress", "r2"}}, Problems: []string{"unreachable at r2: no route to fc00:4::d6"}}},
	}}}
	var b bytes.Buffer
	printStatus(&b, st, false)
	for _, want := range []string{
		"PATH CHAIN  NODES (SID BEHAVIOR)\n",
		"web         ingress → {r1 → nfv1 → egress | r2 ✗} (fc00:4::d6 End.DX6)\n",
		"              ! unreachable at r2: no route to fc00:4::d6\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status output lacks %q:\n%s", want, b.String())
		}
	}
}
