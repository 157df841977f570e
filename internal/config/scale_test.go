package config

import (
	"errors"
	"fmt"
	"math/rand"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	fwsvc "github.com/segchain/segchain/internal/service/firewall"
	nfsvc "github.com/segchain/segchain/internal/service/netfilter"
	"github.com/segchain/segchain/internal/service/srunaware"
)

// The indexed locator/link overlap check finds exactly the pairs that
// comparing every locator with every link prefix finds, on random
// prefixes of mixed lengths and families.
func TestLocatorsOffLinksMatchesPairwise(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	pfx := func() netip.Prefix {
		if r.Intn(8) == 0 {
			a := netip.AddrFrom4([4]byte{10, byte(r.Intn(4)), byte(r.Intn(4)), 0})
			return netip.PrefixFrom(a, []int{8, 16, 24}[r.Intn(3)])
		}
		b := [16]byte{0xfc, 0, 0, byte(r.Intn(4)), 0, byte(r.Intn(4))}
		return netip.PrefixFrom(netip.AddrFrom16(b), []int{16, 32, 40, 48, 64}[r.Intn(5)])
	}
	pairs := 0
	for round := 0; round < 200; round++ {
		d := &Domain{Nodes: map[string]*Node{}}
		for i := 0; i < 1+r.Intn(12); i++ {
			d.Nodes[fmt.Sprintf("n%d", i)] = &Node{Locator: pfx().String()}
		}
		for i := 0; i < 1+r.Intn(12); i++ {
			l := &Link{IPv6: pfx().String()}
			if r.Intn(3) == 0 {
				l.IPv4 = pfx().String()
			}
			d.Links = append(d.Links, l)
		}
		var want []string
		for _, node := range sortedKeys(d.Nodes) {
			loc := netip.MustParsePrefix(d.Nodes[node].Locator)
			for i, l := range d.Links {
				for _, s := range []string{l.IPv6, l.IPv4} {
					if p, err := netip.ParsePrefix(s); err == nil && p.Overlaps(loc) {
						want = append(want, fmt.Sprintf("nodes.%s.locator: locator %s overlaps links[%d] prefix %s", node, loc, i, p))
					}
				}
			}
		}
		v := &validator{d: d, f: d.Format()}
		v.locatorsOffLinks()
		var got []string
		for _, e := range v.errs {
			var loc, p string
			var i int
			fmt.Sscanf(e.Msg, "locator %s overlaps links[%d] prefix %s", &loc, &i, &p)
			got = append(got, fmt.Sprintf("%s: locator %s overlaps links[%d] prefix %s", e.Path, loc, i, p[:len(p)-1]))
		}
		pairs += len(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("round %d (-pairwise +indexed):\n%s", round, diff)
		}
	}
	if pairs < 100 {
		t.Fatalf("only %d overlapping pairs in all rounds: the test proves little", pairs)
	}
}

// limitsDomain is a domain with one of each thing apply refuses for want
// of room in a header or a node's data path.
func limitsDomain(t *testing.T) []byte {
	t.Helper()
	var b strings.Builder
	b.WriteString(`name: limits
nodes:
  ingress: {role: ingress, id: 1, locator: "fc00:1::/64"}
  nfv1: {role: nfv, id: 2, locator: "fc00:2::/64"}
  nfv2: {role: nfv, id: 3, locator: "fc00:3::/64"}
  egress: {role: egress, id: 4, locator: "fc00:4::/64"}
  sf1: {role: sf, id: 5}
links:
  - {endpoints: ["ingress:eth-n", "nfv1:eth-i"], ipv6: "fd00:12::/64"}
  - {endpoints: ["nfv1:eth-n", "nfv2:eth-p"], ipv6: "fd00:23::/64"}
  - {endpoints: ["nfv2:eth-e", "egress:eth-n"], ipv6: "fd00:34::/64"}
  - {endpoints: ["nfv1:eth-sf", "sf1:eth0"], ipv6: "fd00:15::/64"}
security:
  hmac:
    k: {id: 1, secret_file: secrets/ok.key}
services:
  ad: {node: nfv1, kind: sr-unaware, proxy: dynamic, inner: ipv6, sf_nh6: "fd00:15::5", iface_out: eth-sf, iface_in: eth-sf}
  b6: {node: nfv2, behavior: End.B6, segs: [`)
	for i := 0; i < 127; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"fc00:4::%x"`, i+1)
	}
	b.WriteString("]}\n")
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&b, "  e%d: {node: nfv2, behavior: End}\n", i)
	}
	for i := 0; i < srunaware.SIDsMax; i++ { // 256 + ad: one too many
		fmt.Fprintf(&b, "  am%d: {node: nfv1, kind: sr-unaware, proxy: masquerading, sf_nh6: \"fd00:15::5\", iface_out: eth-sf, iface_in: eth-sf}\n", i)
	}
	for i := 0; i <= nfsvc.MaxSIDs; i++ {
		fmt.Fprintf(&b, "  nf%d: {node: nfv2, kind: netfilter, netfilter: {args: 16}}\n", i)
	}
	for i := 0; i <= fwsvc.MaxInstances; i++ {
		fmt.Fprintf(&b, "  fw%d: {node: nfv2, kind: firewall, firewall: {policy: accept}}\n", i)
	}
	b.WriteString("  fwbig: {node: nfv1, kind: firewall, firewall: {rules: [")
	for i := 0; i <= fwsvc.MaxRules; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"-p tcp --dport %d -j DROP"`, i%65536)
	}
	b.WriteString("]}}\nchains:\n")
	chain := func(name, extra string, services ...string) {
		fmt.Fprintf(&b, "  %s:\n    ingress: ingress\n    match: {dst: \"fd00:99::/64\"}\n    services: [%s]\n    egress: {node: egress, behavior: End.DX6, nh6: \"fd00:34::9\"}\n%s",
			name, strings.Join(services, ", "), extra)
	}
	var long []string
	for i := 0; i < 300; i++ {
		long = append(long, fmt.Sprintf("e%d", i))
	}
	chain("long", "", long...)                                    // 301 segments
	chain("fits", "", long[:126]...)                              // 127: the most an SRH holds
	chain("signed", "    hmac: k\n", long[:125]...)               // 126 with the HMAC TLV: 125 at most
	chain("proxied", "", append([]string{"ad"}, long[:28]...)...) // 30 segments: 40+8+480 > 512
	chain("nf", "", append([]string{"nf0"}, long[:27]...)...)     // 29: 40+8+464 = 512, fits
	return []byte(b.String())
}

// Validation refuses everything apply would refuse for want of room, each
// at its path; what just fits passes.
func TestLimits(t *testing.T) {
	_, err := Parse(limitsDomain(t), "testdata/bad")
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("Parse: %v, want an error list", err)
	}
	got := map[string]string{}
	for _, e := range list {
		got[e.Path] += e.Msg + "\n"
	}
	for path, want := range map[string]string{
		"chains.long.services":          "300 services make a segment list of 301, an SRH holds at most 127",
		"chains.signed.services":        "segment list of 126, an SRH holds at most 125 with its HMAC TLV",
		"chains.proxied.services[0]":    "keeps at most 512 bytes of outer headers, this chain's are 528",
		"services.b6.segs":              "128 segments, an SRH holds at most 127",
		"services.fwbig.firewall.rules": "4097 rules",
		"services.am*.node":             "node nfv1 has 257 services of kind sr-unaware, its data path holds at most 256",
		"services.nf*.node":             "node nfv2 has 65 services of kind netfilter, its data path holds at most 64",
		"services.fw*.node":             "node nfv2 has 17 services of kind firewall, its data path holds at most 16",
	} {
		msgs := got[path]
		if pre, suf, ok := strings.Cut(path, "*"); ok {
			msgs = ""
			for p, m := range got {
				if strings.HasPrefix(p, pre) && strings.HasSuffix(p, suf) {
					msgs += m
				}
			}
		}
		if !strings.Contains(msgs, want) {
			t.Errorf("%s: got %q, want %q", path, msgs, want)
		}
	}
	for _, path := range []string{"chains.fits.services", "chains.nf.services[0]"} {
		if got[path] != "" {
			t.Errorf("%s fits, but: %s", path, got[path])
		}
	}
}

// A domain beyond the input bounds is refused with the bound named: a
// file too large before it is parsed, too many chain directions (one
// routing table each: plan's table search would never end) before the
// rest is validated.
func TestBounds(t *testing.T) {
	big := make([]byte, MaxFileSize+1)
	for i := range big {
		big[i] = '\n'
	}
	if _, err := Parse(big, "."); err == nil || !strings.Contains(err.Error(), "at most 33554432") {
		t.Errorf("a %d-byte file: %v, want refused", len(big), err)
	}
	var b strings.Builder
	b.WriteString("name: many\nnodes: {in: {role: ingress, id: 1, locator: \"fc00:1::/64\"}}\nchains:\n")
	for i := 0; i < MaxChainDirections/2; i++ {
		fmt.Fprintf(&b, "  c%d: {ingress: in, match: {dst: \"fd00::/64\"}, bidirectional: true}\n", i)
	}
	b.WriteString("  one-more: {ingress: in, match: {dst: \"fd00::/64\"}}\n")
	_, err := Parse([]byte(b.String()), ".")
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 1 || list[0].Path != "chains" || !strings.Contains(list[0].Msg, "30001 chain directions") {
		t.Errorf("30001 chain directions: %v, want one error at chains", err)
	}
}
