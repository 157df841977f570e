package lab

import (
	"testing"
	"time"

	"github.com/segchain/segchain/examples"
	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/testutil"
)

func defaultTopology(t *testing.T) Topology {
	t.Helper()
	d, err := config.Parse(examples.Default, ".")
	if err != nil {
		t.Fatalf("parse examples/default.yaml: %v", err)
	}
	topo, err := FromDomain(d)
	if err != nil {
		t.Fatalf("FromDomain(default): %v", err)
	}
	return topo
}

// TestDefaultDomainTopology checks the built-in domain maps onto a valid lab:
// the thesis' Figure 3.1 chain of eight nodes plus the SF sf1 behind nfv1,
// hosts not forwarding (sf1 forwards).
func TestDefaultDomainTopology(t *testing.T) {
	topo := defaultTopology(t)
	if err := topo.Validate(); err != nil {
		t.Fatalf("default topology does not validate: %v", err)
	}
	if len(topo.Nodes) != 9 || len(topo.Links) != 8 {
		t.Errorf("default topology: %d nodes, %d links; want 9, 8", len(topo.Nodes), len(topo.Links))
	}
	for _, n := range topo.Nodes {
		host := n.Name == "s" || n.Name == "d"
		if n.Router == host {
			t.Errorf("node %s: router=%v, want %v", n.Name, n.Router, !host)
		}
	}
}

// TestDefaultLabUp brings the default lab up under a random name and pings
// across every link, both ways, over IPv6 and IPv4.
func TestDefaultLabUp(t *testing.T) {
	name := newLabName(t)
	topo := defaultTopology(t)
	topo.Name = name
	l, err := Up(topo)
	if err != nil {
		t.Fatal(err)
	}
	for _, lk := range topo.Links {
		for _, dir := range [][2]Endpoint{{lk.A, lk.B}, {lk.B, lk.A}} {
			from, to := dir[0], dir[1]
			for _, a := range to.Addrs {
				t.Run(from.String()+"->"+a.Addr().String(), func(t *testing.T) {
					if err := testutil.Ping(l.Nodes[from.Node], a.Addr(), 5*time.Second); err != nil {
						t.Error(err)
					}
				})
			}
		}
	}
	if _, ok := l.Nodes["s"]; !ok {
		t.Errorf("default lab has no node s: %v", l.Nodes)
	}
}
