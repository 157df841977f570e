package controller

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/service/firewall"
	"github.com/segchain/segchain/internal/service/srunaware"
)

// Broken eBPF objects are drift even when the SID lists match, and
// orphaned pins are removed even when nothing is wanted.
func TestComputeFaults(t *testing.T) {
	px := proxies(srunaware.Proxy{SID: netip.MustParsePrefix("fc00:2::1/128"), Behavior: "End.AS", Params: []string{"oif", "a"}})
	tests := []struct {
		name           string
		observed, want nodestate.Node
		adds, deletes  int
		kind           string
	}{
		{"healthy", nodestate.Node{Services: px}, nodestate.Node{Services: px}, 0, 0, ""},
		{"proxy link missing", nodestate.Node{Services: px, Faults: map[string][]string{srunaware.Name: {"proxy_tc on eth0: not attached"}}},
			nodestate.Node{Services: px}, 1, 0, srunaware.Name},
		{"firewall orphans", nodestate.Node{Faults: map[string][]string{firewall.Name: {"orphaned pins in /x: fw_rules"}}},
			nodestate.Node{}, 0, 1, firewall.Name},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Compute(&tt.observed, &tt.want)
			if len(d.Adds) != tt.adds || len(d.Deletes) != tt.deletes {
				t.Fatalf("got %d adds, %d deletes, want %d, %d: %+v", len(d.Adds), len(d.Deletes), tt.adds, tt.deletes, d)
			}
			for _, op := range d.Ops() {
				if !isKind(op, tt.kind) || !strings.Contains(op.String(), "! repair:") {
					t.Errorf("op %q: want a %s repair", op.String(), tt.kind)
				}
			}
		})
	}
}
