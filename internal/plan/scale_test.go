package plan

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/nodestate"
)

// bigDomain is a valid domain file of n native End services spread over
// NFV nodes in line (ingress, nfv1..nfvK, egress) and n/chainLen chains
// of chainLen services each: what `validate` is given at scale.
func bigDomain(n int) []byte {
	const perNode, chainLen = 4096, 16
	k := (n + perNode - 1) / perNode
	var b strings.Builder
	b.WriteString("name: big\nnodes:\n  s: {role: host, id: 0xfff0}\n  ingress: {role: ingress, id: 1, locator: \"fc00:1::/64\"}\n")
	for i := 1; i <= k; i++ {
		fmt.Fprintf(&b, "  nfv%d: {role: nfv, id: %d, locator: \"fc00:%x::/64\"}\n", i, i+1, i+1)
	}
	fmt.Fprintf(&b, "  egress: {role: egress, id: %d, locator: \"fc00:%x::/64\"}\n  d: {role: host, id: 0xfff1}\nlinks:\n", k+2, k+2)
	fmt.Fprintf(&b, "  - {endpoints: [\"s:eth0\", \"ingress:eth-s\"], ipv6: \"fd00:1::/64\"}\n")
	prev, prevIf := "ingress", "eth-n"
	for i := 1; i <= k; i++ {
		fmt.Fprintf(&b, "  - {endpoints: [\"%s:%s\", \"nfv%d:eth-p\"], ipv6: \"fd01:%x::/64\"}\n", prev, prevIf, i, i)
		prev, prevIf = fmt.Sprintf("nfv%d", i), "eth-n"
	}
	fmt.Fprintf(&b, "  - {endpoints: [\"%s:%s\", \"egress:eth-p\"], ipv6: \"fd02::/64\"}\n", prev, prevIf)
	fmt.Fprintf(&b, "  - {endpoints: [\"egress:eth-d\", \"d:eth0\"], ipv6: \"fd03::/64\"}\nservices:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  s%d: {node: nfv%d, behavior: End}\n", i, i/perNode+1)
	}
	b.WriteString("chains:\n")
	for c := 0; c*chainLen < n; c++ {
		fmt.Fprintf(&b, "  c%d:\n    ingress: ingress\n    match: {dst: \"fd03::/64\", proto: udp, dport: \"%d\"}\n    services: [", c, c%65536)
		for j := c * chainLen; j < min(n, (c+1)*chainLen); j++ {
			if j > c*chainLen {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "s%d", j)
		}
		b.WriteString("]\n    egress: {node: egress, behavior: End.DX6, nh6: \"fd03::fff1\"}\n")
	}
	return []byte(b.String())
}

// BenchmarkValidate is `segchain validate` (config.Parse, then Build) of
// domains of growing size: ns/op should grow linearly with the services.
func BenchmarkValidate(b *testing.B) {
	for _, n := range []int{5000, 20000, 80000, 260000} {
		data := bigDomain(n)
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				d, err := config.Parse(data, ".")
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Build(d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A boundary beyond the program's maps (here: more external SIDs than
// its prefix map holds) is refused by plan, so by validate, at
// security.boundary, instead of failing in apply.
func TestBoundaryFits(t *testing.T) {
	var b strings.Builder
	b.WriteString(`name: ext
nodes:
  ingress: {role: ingress, id: 1, locator: "fc00:1::/64"}
  nfv1: {role: nfv, id: 2, locator: "fc00:2::/64"}
links:
  - {endpoints: ["ingress:eth-n", "nfv1:eth-i"], ipv6: "fd00:12::/64"}
services:
`)
	for i := 0; i < nodestate.BoundaryPrefixesMax; i++ {
		fmt.Fprintf(&b, "  x%d: {node: nfv1, behavior: End, external: true}\n", i)
	}
	d, err := config.Parse([]byte(b.String()), ".")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Build(d)
	var list config.ErrorList
	if !errors.As(err, &list) || len(list) == 0 || list[0].Path != "security.boundary" || !strings.Contains(list[0].Msg, "the boundary filter holds at most 4096") {
		t.Fatalf("Build: %v, want a refusal at security.boundary", err)
	}
}
