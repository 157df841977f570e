package controller

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/plan"
	"github.com/segchain/segchain/internal/service/kinds"
	"github.com/segchain/segchain/internal/service/srunaware"
)

// proxyPlan is twoNodePlan whose nfv node also runs an End.AD proxy.
func proxyPlan(params ...string) *plan.Plan {
	p := twoNodePlan("fc00:2::100")
	p.Nodes["nfv"].Services = proxies(srunaware.Proxy{SID: mustPrefix("fc00:2::ad/128"), Behavior: "End.AD", Params: params})
	return p
}

var adParams = []string{"inner", "ipv6", "nh6", "fc00:27::7", "oif", "sf0", "iif", "sf0"}

func TestProxies(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// from is applied first, then to; wantOps are the ops of the
		// second apply on nfv.
		from, to *plan.Plan
		wantOps  []string
	}{
		{
			name:    "install",
			from:    twoNodePlan("fc00:2::100"),
			to:      proxyPlan(adParams...),
			wantOps: []string{"~ proxies: 0 -> 1\n    + proxy fc00:2::ad/128 End.AD inner ipv6 nh6 fc00:27::7 oif sf0 iif sf0"},
		},
		{
			name: "same proxy spelled differently is no change",
			from: proxyPlan(adParams...),
			to:   proxyPlan("iif", "sf0", "oif", "sf0", "nh6", "fc00:27::7", "inner", "ipv6"),
		},
		{
			name: "change",
			from: proxyPlan(adParams...),
			to:   proxyPlan("inner", "ipv6", "nh6", "fc00:27::7", "oif", "sf0", "iif", "sf0", "flow"),
			wantOps: []string{"~ proxies: 1 -> 1\n    + proxy fc00:2::ad/128 End.AD inner ipv6 nh6 fc00:27::7 oif sf0 iif sf0 flow" +
				"\n    - proxy fc00:2::ad/128 End.AD inner ipv6 nh6 fc00:27::7 oif sf0 iif sf0"},
		},
		{
			// Make-before-break: the new SID is installed beside the old
			// one (taking its IFACE-IN over) before the policies move, the
			// old one goes after them.
			name: "SID change",
			from: proxyPlan(adParams...),
			to: func() *plan.Plan {
				p := proxyPlan(adParams...)
				p.Nodes["nfv"].Services[0].SID = mustPrefix("fc00:2::ae/128")
				return p
			}(),
			wantOps: []string{
				"~ proxies: 1 -> 2\n    + proxy fc00:2::ae/128 End.AD inner ipv6 nh6 fc00:27::7 oif sf0 iif sf0",
				"~ proxies: 2 -> 1\n    - proxy fc00:2::ad/128 End.AD inner ipv6 nh6 fc00:27::7 oif sf0 iif sf0",
			},
		},
		{
			name:    "remove",
			from:    proxyPlan(adParams...),
			to:      twoNodePlan("fc00:2::100"),
			wantOps: []string{"~ proxies: 1 -> 0\n    - proxy fc00:2::ad/128 End.AD inner ipv6 nh6 fc00:27::7 oif sf0 iif sf0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, fakes := newCtl(tt.from)
			if _, err := c.Apply(ctx, false); err != nil {
				t.Fatal(err)
			}
			fakes["nfv"].Log = nil
			c.Plan = tt.to
			if _, err := c.Apply(ctx, false); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantOps, fakes["nfv"].Log); diff != "" {
				t.Errorf("nfv ops (-want +got):\n%s", diff)
			}
			res, err := c.Apply(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			if n := res.Changes(); n != 0 {
				t.Errorf("second apply changed %d things", n)
			}
		})
	}
}

// TestProxyOpOrder checks that the proxies are installed after the endpoint
// routes and before the policies that steer traffic into them, and removed
// after the policies on teardown.
func TestProxyOpOrder(t *testing.T) {
	want := &nodestate.Node{Name: "n",
		Routes: []nodestate.Route{
			{Dst: mustPrefix("fc00:2::100/128"), Dev: "lo", Seg6Local: &nodestate.Seg6Local{Action: "End"}},
			{Dst: mustPrefix("fc00:d::/64"), Table: 1500, Dev: "eth0", Seg6: &nodestate.Seg6Encap{Mode: "encap", Segs: []netip.Addr{mustAddr("fc00:2::ad")}}},
		},
		Rules:    []nodestate.Rule{{Family: 6, Priority: 5000, Dst: mustPrefix("fc00:d::/64"), Table: 1500}},
		Services: proxies(srunaware.Proxy{SID: mustPrefix("fc00:2::ad/128"), Behavior: "End.AD", Params: adParams}),
	}
	kinds := func(ops []agent.Op) []string {
		var k []string
		for _, o := range ops {
			s := string(o.Kind)
			if o.Kind == agent.KindServices {
				s = kinds.Registry().Plural(o.Service)
			}
			if o.Kind == agent.KindRoute && o.Route.Seg6 != nil {
				s = "policy"
			}
			k = append(k, s)
		}
		return k
	}
	d := Compute(&nodestate.Node{Name: "n"}, want)
	if diff := cmp.Diff([]string{"route", "proxies", "policy", "rule"}, kinds(d.Adds)); diff != "" {
		t.Errorf("adds (-want +got):\n%s", diff)
	}
	td := Teardown(want, want, nil)
	if diff := cmp.Diff([]string{"rule", "policy", "proxies", "route"}, kinds(td.Deletes)); diff != "" {
		t.Errorf("teardown deletes (-want +got):\n%s", diff)
	}
	if len(td.Adds) != 0 {
		t.Errorf("teardown adds %v", td.Adds)
	}
	for _, o := range td.Deletes {
		if isKind(o, srunaware.Name) {
			if len(o.Services) != 0 || len(o.OldServices) != 1 {
				t.Errorf("teardown proxies op = %s", o)
			}
			if inv := o.Inverse(); len(inv.Services) != 1 || !strings.Contains(inv.String(), "+ proxy fc00:2::ad/128") {
				t.Errorf("inverse of teardown = %s", inv)
			}
		}
	}
}
