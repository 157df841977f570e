package oam_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/dataplane"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/oam"
	"github.com/segchain/segchain/internal/plan"
	"github.com/segchain/segchain/internal/testutil"
)

// headendRoute is the encap route in namespace ns, table table, that
// carries traffic to dst.
func headendRoute(t *testing.T, ns string, table int, dst netip.Addr) nodestate.Route {
	t.Helper()
	h, err := dataplane.Open(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	rs, err := h.Routes()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Table == table && r.Dst.Contains(dst) {
			return r
		}
	}
	t.Fatalf("no encap route to %s in %s: %v", dst, ns, rs)
	return nodestate.Route{}
}

// routeMarked replaces the chain's headend route with the route marker
// at rate while send runs, puts the kernel's route back, and returns the
// marker's counts; the route is back as it was.
func routeMarked(t *testing.T, e *env, chain string, rate uint32, send func()) oam.SampleCounts {
	t.Helper()
	var pc *plan.Chain
	for i := range e.d.Plan.Chains {
		if e.d.Plan.Chains[i].Name == chain {
			pc = &e.d.Plan.Chains[i]
		}
	}
	if pc == nil {
		t.Fatalf("no chain %s in the plan", chain)
	}
	ns, _ := e.lab.Netns(pc.Ingress)
	orig := headendRoute(t, ns, pc.Table, netip.MustParseAddr("fc00:4d::d"))
	if orig.Seg6 == nil {
		t.Fatalf("%s's headend route %s has no seg6 encap", chain, orig)
	}
	var m *oam.RouteMarker
	if err := nsutil.Do(ns, func() (err error) {
		m, err = oam.AttachRouteMarker(orig, rate)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = nsutil.Do(ns, m.Close)
		}
	})
	if r := headendRoute(t, ns, pc.Table, netip.MustParseAddr("fc00:4d::d")); r.Seg6 != nil {
		// Routes lists a BPF route without its encap: still seg6 means
		// the replace did nothing.
		t.Fatalf("route %s still the kernel's encap seg6 after AttachRouteMarker", r)
	}
	send()
	c, err := m.Counts()
	if err != nil {
		t.Fatal(err)
	}
	closed = true
	if err := nsutil.Do(ns, m.Close); err != nil {
		t.Fatal(err)
	}
	if back := headendRoute(t, ns, pc.Table, netip.MustParseAddr("fc00:4d::d")); back.String() != orig.String() {
		t.Errorf("after Close: %s, want the kernel's route back: %s", back, orig)
	}
	return c
}

// The route marker (encap bpf in, the kernel's encapsulation through
// bpf_lwt_push_encap) at 1:100 on web's headend: every packet of a
// 2000-datagram stream counted and delivered, exactly 20 with the O-flag
// as tshark reads the SRH on r1, the other 1980 without.
func TestRouteMarkerOFlag(t *testing.T) {
	e := setup(t, "../../examples/default.yaml", nil)
	testutil.RequireTool(t, "tshark")
	const count, rate = 2000, 100
	r1, _ := e.lab.Netns("r1")
	s, _ := e.lab.Netns("s")
	d, _ := e.lab.Netns("d")
	var res testutil.StreamResult
	var pcap string
	c := routeMarked(t, e, "web", rate, func() {
		cp := testutil.StartInboundCapture(t, r1, "eth-ingress", "ip6[6] == 43 and ip6[40+2] == 4", count)
		res = testutil.Stream(t, seqstream, s, d, "fc00:4d::d", 7000, count, 1000, nil)
		pcap = cp.Wait(5 * time.Second)
	})
	if res.Lost != 0 || res.Unique != count {
		t.Errorf("stream: %+v, want all %d received", res, count)
	}
	if c.Seen != count || c.Marked != count/rate {
		t.Errorf("route marker counted %d, marked %d; want %d, %d", c.Seen, c.Marked, count, count/rate)
	}
	flags := map[string]int{}
	for _, p := range testutil.Tshark(t, pcap, "ipv6.routing.srh.flags") {
		flags[p.First("ipv6.routing.srh.flags")]++
	}
	if flags["0x20"] != count/rate || flags["0x00"] != count-count/rate {
		t.Errorf("r1 saw SRH flags %v, want 0x20 × %d and 0x00 × %d", flags, count/rate, count-count/rate)
	}
}

// An HMAC chain marked by the route marker at 1:1: the kernel computes
// the HMAC after the O-flag is in the SRH (seg6_do_srh_encap), so nfv1
// and the egress, which require a valid HMAC, forward every packet.
func TestRouteMarkerHMAC(t *testing.T) {
	e := setup(t, "../../examples/hmac.yaml", nil)
	s, _ := e.lab.Netns("s")
	d, _ := e.lab.Netns("d")
	const count = 200
	var res testutil.StreamResult
	c := routeMarked(t, e, "signed", 1, func() {
		res = testutil.Stream(t, seqstream, s, d, "fc00:4d::d", 7000, count, 1000, nil)
	})
	if res.Lost != 0 || res.Unique != count {
		t.Errorf("stream: %+v, want all %d received through the HMAC-checking SIDs", res, count)
	}
	if c.Seen != count || c.Marked != count {
		t.Errorf("route marker counted %d, marked %d; want %d, %d", c.Seen, c.Marked, count, count)
	}
}
