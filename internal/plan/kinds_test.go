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
	ps, err := srunaware.ProxiesOf(n.Services)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// firewallsOf returns the node's services of kind firewall.
func firewallsOf(t *testing.T, n *nodestate.Node) []firewall.Spec {
	t.Helper()
	fs, err := firewall.SpecsOf(n.Services)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}
