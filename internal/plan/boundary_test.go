package plan

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/nodestate"
)

func loadDefault(t *testing.T) *config.Domain {
	t.Helper()
	d, err := config.Load("../../examples/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestBoundaryDefaults: SR nodes trust their links to SR nodes and to the
// SFs they serve; hosts and sfs get no filter; every node knows every
// locator.
func TestBoundaryDefaults(t *testing.T) {
	p, err := Build(loadDefault(t))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"ingress": {"eth-r1"},
		"r1":      {"eth-ingress", "eth-nfv1"},
		"nfv1":    {"eth-r1", "eth-r2", "eth-sf1"},
		"r2":      {"eth-nfv1", "eth-nfv2"},
		"nfv2":    {"eth-egress", "eth-r2"},
		"egress":  {"eth-nfv2"},
	}
	for n, node := range p.Nodes {
		w, sr := want[n]
		if !sr {
			if node.Boundary != nil {
				t.Errorf("%s (outside the domain) has a boundary: %s", n, node.Boundary)
			}
			continue
		}
		if node.Boundary == nil {
			t.Fatalf("%s has no boundary", n)
		}
		w = append(w, nodestate.UserspaceLoopPattern, nodestate.NFLoopOut, nodestate.NFLoopIn, nodestate.LoopDev, nodestate.LoopPeer) // the service and netfilter loops, always
		if diff := cmp.Diff(w, node.Boundary.Trusted); diff != "" {
			t.Errorf("%s trusted (-want +got):\n%s", n, diff)
		}
		if len(node.Boundary.Locators) != 4 || len(node.Boundary.External) != 0 {
			t.Errorf("%s: %s", n, node.Boundary)
		}
	}
	if len(p.Warnings) != 0 {
		t.Errorf("warnings for the default domain: %q", p.Warnings)
	}
}

// TestBoundaryOverrides: interfaces, trusted (interface and node),
// external services and off.
func TestBoundaryOverrides(t *testing.T) {
	d := loadDefault(t)
	d.Security.Boundary = config.Boundary{Interfaces: []string{"r1:eth-nfv1"}, Trusted: []string{"ingress:eth-s", "egress:eth-mgmt", "r2"}}
	d.Services["nfv1-end"].External = true
	p, err := Build(d)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Nodes["r1"].Boundary.Trusted; !cmp.Equal(got, []string{"eth-ingress", nodestate.UserspaceLoopPattern, nodestate.NFLoopOut, nodestate.NFLoopIn, nodestate.LoopDev, nodestate.LoopPeer}) {
		t.Errorf("r1 trusted %v, want [eth-ingress] (eth-nfv1 made a boundary)", got)
	}
	if got := p.Nodes["ingress"].Boundary.Trusted; !cmp.Equal(got, []string{"eth-r1", "eth-s", nodestate.UserspaceLoopPattern, nodestate.NFLoopOut, nodestate.NFLoopIn, nodestate.LoopDev, nodestate.LoopPeer}) {
		t.Errorf("ingress trusted %v", got)
	}
	if got := p.Nodes["egress"].Boundary.Trusted; !cmp.Equal(got, []string{"eth-mgmt", "eth-nfv2", nodestate.UserspaceLoopPattern, nodestate.NFLoopOut, nodestate.NFLoopIn, nodestate.LoopDev, nodestate.LoopPeer}) {
		t.Errorf("egress trusted %v (an undescribed interface can be trusted)", got)
	}
	if p.Nodes["r2"].Boundary != nil {
		t.Errorf("trusted node r2 has a boundary: %s", p.Nodes["r2"].Boundary)
	}
	sids, _ := d.SIDs()
	ext := p.Nodes["ingress"].Boundary.External
	if len(ext) != 1 || !ext[0].Contains(sids["nfv1-end"]) {
		t.Errorf("external %v, want nfv1-end's SID %s", ext, sids["nfv1-end"])
	}
	if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "node r2 is trusted") {
		t.Errorf("warnings %q", p.Warnings)
	}

	d.Security.Boundary = config.Boundary{Off: true}
	p, err = Build(d)
	if err != nil {
		t.Fatal(err)
	}
	for n, node := range p.Nodes {
		if node.Boundary != nil {
			t.Errorf("boundary off: %s still has %s", n, node.Boundary)
		}
	}
	if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "boundary filtering is off") {
		t.Errorf("warnings %q", p.Warnings)
	}
}

// TestHMACCoverage: the nodes of a signed chain's SIDs require HMAC;
// a node that also serves an unsigned chain, and eBPF-served SIDs, are
// warned about instead.
func TestHMACCoverage(t *testing.T) {
	d := loadDefault(t)
	d.Security.HMAC = map[string]*config.HMACKey{"k": {ID: 7, Algorithm: "sha256", SecretFile: "../internal/config/testdata/bad/secrets/ok.key"}}
	d.Chains["firewalled"].HMAC = "k"
	p, err := Build(d)
	if err != nil {
		t.Fatal(err)
	}
	requires := func(n string) bool {
		for _, s := range p.Nodes[n].Sysctls {
			if s.Key == "net.ipv6.conf.all.seg6_require_hmac" && s.Value == "1" {
				return true
			}
		}
		return false
	}
	for _, n := range []string{"nfv1", "nfv2", "egress"} {
		if requires(n) {
			t.Errorf("%s requires HMAC although it serves unsigned chains", n)
		}
	}
	joined := strings.Join(p.Warnings, "\n")
	for _, w := range []string{"SID of nfv1-fw on node nfv1 does not verify the HMAC: it is served by eBPF",
		"SID of nfv2-end on node nfv2 does not verify the HMAC: the node also serves unsigned chain(s)",
		"SID of egress on node egress does not verify the HMAC"} {
		if !strings.Contains(joined, w) {
			t.Errorf("no warning %q in:\n%s", w, joined)
		}
	}
}

// TestBoundarySFAddresses: every SR node's filter holds the sf nodes'
// addresses (dropped whatever the packet: to-sf) and not as node
// addresses; security.boundary.sf_reachable moves an SF's addresses to the
// node list (plain traffic passes, SRv6 does not); the sf node runs with
// seg6_enabled 0.
func TestBoundarySFAddresses(t *testing.T) {
	sf := netip.MustParseAddr("fc00:27::7")
	p, err := Build(loadDefault(t))
	if err != nil {
		t.Fatal(err)
	}
	for n, node := range p.Nodes {
		if node.Boundary == nil {
			continue
		}
		if !slices.Equal(node.Boundary.SFs, []netip.Addr{sf}) || slices.Contains(node.Boundary.Nodes, sf) {
			t.Errorf("%s: SFs %v, nodes %v: want sf1's address among the SFs only", n, node.Boundary.SFs, node.Boundary.Nodes)
		}
	}
	var sysctls []string
	for _, s := range p.Nodes["sf1"].Sysctls {
		if strings.Contains(s.Key, "seg6_enabled") {
			sysctls = append(sysctls, s.Key+"="+s.Value)
		}
	}
	if want := []string{"net.ipv6.conf.all.seg6_enabled=0", "net.ipv6.conf.eth-nfv1.seg6_enabled=0"}; !cmp.Equal(sysctls, want) {
		t.Errorf("sf1 seg6_enabled sysctls %q, want %q", sysctls, want)
	}

	d := loadDefault(t)
	d.Security.Boundary.SFReachable = []string{"sf1"}
	p, err = Build(d)
	if err != nil {
		t.Fatal(err)
	}
	if b := p.Nodes["ingress"].Boundary; len(b.SFs) != 0 || !slices.Contains(b.Nodes, sf) {
		t.Errorf("sf_reachable [sf1]: ingress' boundary %s, want sf1's address a node address", b)
	}
}
