package controller

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/nodestate"
)

// Broken eBPF objects are drift even when the SID lists match, and
// orphaned pins are removed even when nothing is wanted.
func TestComputeFaults(t *testing.T) {
	px := []nodestate.Proxy{{SID: netip.MustParsePrefix("fc00:2::1/128"), Behavior: "End.AS", Params: []string{"oif", "a"}}}
	tests := []struct {
		name           string
		observed, want nodestate.Node
		adds, deletes  int
		kind           agent.Kind
	}{
		{"healthy", nodestate.Node{Proxies: px}, nodestate.Node{Proxies: px}, 0, 0, ""},
		{"proxy link missing", nodestate.Node{Proxies: px, ProxyFaults: []string{"proxy_tc on eth0: not attached"}},
			nodestate.Node{Proxies: px}, 1, 0, agent.KindProxies},
		{"firewall orphans", nodestate.Node{FirewallFaults: []string{"orphaned pins in /x: fw_rules"}},
			nodestate.Node{}, 0, 1, agent.KindFirewalls},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Compute(&tt.observed, &tt.want)
			if len(d.Adds) != tt.adds || len(d.Deletes) != tt.deletes {
				t.Fatalf("got %d adds, %d deletes, want %d, %d: %+v", len(d.Adds), len(d.Deletes), tt.adds, tt.deletes, d)
			}
			for _, op := range d.Ops() {
				if op.Kind != tt.kind || !strings.Contains(op.String(), "! repair:") {
					t.Errorf("op %q: want a %s repair", op.String(), tt.kind)
				}
			}
		})
	}
}
