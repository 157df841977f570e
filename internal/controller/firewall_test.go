package controller

import (
	"net/netip"
	"testing"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/service/firewall"
)

func TestDiffFirewalls(t *testing.T) {
	fw := firewall.Spec{SID: netip.MustParsePrefix("fc00:2::f1:0/112"), ArgsBits: 16, Policy: "accept",
		Rules: []string{"-p tcp --dport 22 -j DROP"}}
	same := fw
	same.Rules = []string{"-p tcp -m tcp --dport 22 -j DROP"} // spelled differently
	same.Args = map[uint32]string{0: "go-next", 1: "drop", 2: "skip-next", 3: "go-last"}
	changed := fw
	changed.Policy = "drop"
	kinds := func(ops []agent.Op) (n int) {
		for _, o := range ops {
			if isKind(o, firewall.Name) {
				n++
			}
		}
		return n
	}
	node := func(fws ...firewall.Spec) *nodestate.Node {
		return &nodestate.Node{Name: "nfv", Services: firewalls(fws...)}
	}
	tests := []struct {
		name          string
		obs, want     *nodestate.Node
		adds, deletes int
	}{
		{"install", node(), node(fw), 1, 0},
		{"unchanged", node(fw), node(same), 0, 0},
		{"changed", node(fw), node(changed), 1, 0},
		{"removed", node(fw), node(), 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Compute(tt.obs, tt.want)
			if a, del := kinds(d.Adds), kinds(d.Deletes); a != tt.adds || del != tt.deletes {
				t.Errorf("firewall ops: %d adds, %d deletes; want %d, %d\n%+v", a, del, tt.adds, tt.deletes, d)
			}
		})
	}
	if d := Teardown(node(fw), node(fw), nil); kinds(d.Deletes) != 1 {
		t.Errorf("teardown keeps the firewall: %+v", d)
	}
}
