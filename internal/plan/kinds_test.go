package plan

import (
	"testing"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/service/firewall"
	"github.com/segchain/segchain/internal/service/srunaware"
)

// proxiesOf returns the node's services of kind sr-unaware.
func proxiesOf(t *testing.T, n *nodestate.Node) []srunaware.Proxy {
	t.Helper()
	var out []srunaware.Proxy
	for _, s := range nodestate.ServicesOf(n.Services, srunaware.Name) {
		p, err := srunaware.ProxyOf(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// firewallsOf returns the node's services of kind firewall.
func firewallsOf(t *testing.T, n *nodestate.Node) []firewall.Spec {
	t.Helper()
	var out []firewall.Spec
	for _, s := range nodestate.ServicesOf(n.Services, firewall.Name) {
		f, err := firewall.SpecOf(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}
