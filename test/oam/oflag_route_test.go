package oam_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/dataplane"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/oam/oamsvc"
	"github.com/segchain/segchain/internal/plan"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
)

// setupOF is setup with this file's namespace prefix.
func setupOF(t *testing.T, file string, before func(*lab.Lab)) *env {
	t.Helper()
	le := labenv.New(t, labenv.Options{File: file, Prefix: "s15of"})
	if before != nil {
		before(le.Lab)
	}
	s := le.Session(nil)
	if _, err := s.Apply(context.Background()); err != nil {
		t.Fatalf("apply: %v", err)
	}
	return &env{t: t, lab: le.Lab, d: oamsvc.Domain(s)}
}

// The kernel's own encap seg6 route with the O-flag in its SRH (what the
// O-flagged table of a sampled chain holds): every packet leaves the
// headend with flags 0x20 (0x28 with the HMAC flag: the kernel signs the
// SRH it copies, flags included), and the HMAC-requiring SIDs of the
// signed chain pass every one.
func TestOFlagRouteKernel(t *testing.T) {
	testutil.RequireTool(t, "tshark")
	for _, tc := range []struct{ file, chain, at, iface, want string }{
		{"../../examples/default.yaml", "web", "r1", "eth-ingress", "0x20"},
		{"../../examples/hmac.yaml", "signed", "nfv1", "eth-ingress", "0x28"},
	} {
		t.Run(tc.chain, func(t *testing.T) {
			e := setupOF(t, tc.file, nil)
			const count = 300
			pc := e.chain(t, tc.chain)
			ns, _ := e.lab.Netns(pc.Ingress)
			r := headendRoute(t, ns, pc.Table, netip.MustParseAddr("fc00:4d::d"))
			r.Seg6.OFlag = true
			h, err := dataplane.Open(ns)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			if err := h.ReplaceRoute(r); err != nil {
				t.Fatal(err)
			}
			if back := headendRoute(t, ns, pc.Table, netip.MustParseAddr("fc00:4d::d")); !back.Seg6.OFlag {
				t.Fatalf("route read back without the O-flag: %s", back)
			}
			at, _ := e.lab.Netns(tc.at)
			s, _ := e.lab.Netns("s")
			d, _ := e.lab.Netns("d")
			c := testutil.StartInboundCapture(t, at, tc.iface, "ip6[6] == 43 and ip6[40+2] == 4", count)
			res := testutil.Stream(t, seqstream, s, d, "fc00:4d::d", 7000, count, 1000, nil)
			pcap := c.Wait(5 * time.Second)
			if res.Lost != 0 || res.Unique != count {
				t.Errorf("stream: %+v, want all %d received", res, count)
			}
			flags := map[string]int{}
			for _, p := range testutil.Tshark(t, pcap, "ipv6.routing.srh.flags") {
				flags[p.First("ipv6.routing.srh.flags")]++
			}
			if flags[tc.want] != count || len(flags) != 1 {
				t.Errorf("%s saw SRH flags %v, want %s × %d", tc.at, flags, tc.want, count)
			}
		})
	}
}

// chain is the plan's chain name.
func (e *env) chain(t *testing.T, name string) *plan.Chain {
	t.Helper()
	for i := range e.d.Plan.Chains {
		if e.d.Plan.Chains[i].Name == name {
			return &e.d.Plan.Chains[i]
		}
	}
	t.Fatalf("no chain %s in the plan", name)
	return nil
}
