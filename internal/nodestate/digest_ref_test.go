package nodestate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The digest is compared across builds (an agent and a controller of
// different versions): the faster Digest must hash exactly what the
// first one did. digestReference and routeReference are those, verbatim.
func TestDigestSameAsReference(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 300; i++ {
		n, want := randomNode(rng), randomNode(rng)
		for _, w := range []*Node{want, n, nil} {
			if got, ref := Digest(n, w), digestReference(n, w); got != ref {
				t.Fatalf("node %d: digest %s, the reference's %s", i, got, ref)
			}
		}
		for _, r := range n.Routes {
			if got, ref := r.String(), routeReference(r); got != ref {
				t.Fatalf("route %q, the reference's %q", got, ref)
			}
		}
	}
	if Digest(nil, nil) != digestReference(nil, nil) {
		t.Fatal("empty node: digests differ")
	}
}

func randomNode(rng *rand.Rand) *Node {
	addr := func() netip.Addr {
		return netip.AddrFrom16([16]byte{0xfc, 0, byte(rng.Intn(4)), byte(rng.Intn(256)), 15: byte(rng.Intn(3))})
	}
	n := &Node{Name: "n"}
	for i := rng.Intn(40); i > 0; i-- {
		r := Route{Dst: netip.PrefixFrom(addr(), 16+rng.Intn(113)).Masked(), Owner: "x"}
		if rng.Intn(20) == 0 {
			r.Dst = netip.Prefix{}
		}
		if rng.Intn(2) == 0 {
			r.Via = addr()
		}
		if rng.Intn(2) == 0 {
			r.Dev = "e" + strconv.Itoa(rng.Intn(5))
		}
		if rng.Intn(4) == 0 {
			r.Table = []int{100, 254, 255}[rng.Intn(3)]
		}
		if rng.Intn(4) == 0 {
			r.Metric = rng.Intn(2000)
		}
		if rng.Intn(4) == 0 {
			r.Proto = rng.Intn(300)
		}
		if rng.Intn(4) == 0 {
			r.Seg6Local = &Seg6Local{Action: "End.X", Nh6: addr()}
		}
		n.Routes = append(n.Routes, r)
		if rng.Intn(10) == 0 {
			n.Routes = append(n.Routes, r) // a duplicate
		}
	}
	for i := rng.Intn(4); i > 0; i-- {
		n.Sysctls = append(n.Sysctls, Sysctl{Key: "k" + strconv.Itoa(rng.Intn(6)), Value: strconv.Itoa(rng.Intn(2))})
	}
	for i := rng.Intn(3); i > 0; i-- {
		n.Rules = append(n.Rules, Rule{Family: 6, Priority: rng.Intn(3), Table: 100})
	}
	if rng.Intn(2) == 0 {
		n.TunSrc = addr().String()
	}
	if rng.Intn(3) == 0 {
		n.HMACKeys = []HMACKey{{ID: uint32(rng.Intn(9)), Alg: "sha256", Secret: []byte{byte(rng.Intn(9))}}}
	}
	if rng.Intn(3) == 0 {
		n.Services = []Service{{Kind: "fw", SID: netip.PrefixFrom(addr(), 64), Spec: json.RawMessage(`{ "a" : 1 }`)}}
	}
	if rng.Intn(3) == 0 {
		n.Boundary = &Boundary{Locators: []netip.Prefix{netip.PrefixFrom(addr(), 48).Masked()}}
	}
	if rng.Intn(3) == 0 {
		n.Faults = map[string][]string{"fw": {"a", "b"}, "nf": {"c"}}
	}
	if rng.Intn(3) == 0 {
		n.Foreign = []ForeignRoute{{Route: Route{Dst: netip.PrefixFrom(addr(), 64).Masked(), Dev: "e0"}, Protocol: rng.Intn(200)}}
	}
	return n
}

func routeReference(r Route) string {
	var b strings.Builder
	b.WriteString(r.Dst.String())
	if r.Seg6 != nil {
		b.WriteString(" " + r.Seg6.String())
	}
	if r.Seg6Local != nil {
		b.WriteString(" " + r.Seg6Local.String())
	}
	if r.Via.IsValid() {
		b.WriteString(" via " + r.Via.String())
	}
	if r.Dev != "" {
		b.WriteString(" dev " + r.Dev)
	}
	if r.Table != 0 && r.Table != 254 {
		fmt.Fprintf(&b, " table %d", r.Table)
	}
	if r.Metric != 0 {
		fmt.Fprintf(&b, " metric %d", r.Metric)
	}
	if r.Proto != 0 {
		fmt.Fprintf(&b, " proto %d", r.Proto)
	}
	return b.String()
}

func digestReference(n, want *Node) string {
	if n == nil {
		n = &Node{}
	}
	if want == nil {
		want = &Node{}
	}
	var lines []string
	add := func(kind string, items []string) {
		sort.Strings(items)
		for i, it := range items {
			if i > 0 && it == items[i-1] {
				continue
			}
			lines = append(lines, kind+" "+it)
		}
	}
	got := map[string]string{}
	for _, s := range n.Sysctls {
		got[s.Key] = s.Value
	}
	var sys []string
	for _, s := range want.Sysctls {
		sys = append(sys, s.Key+"="+got[s.Key])
	}
	add("sysctl", sys)
	if want.TunSrc != "" {
		lines = append(lines, "tunsrc "+n.TunSrc)
	}
	var keys []string
	for _, k := range n.HMACKeys {
		h := sha256.Sum256(k.Secret)
		keys = append(keys, strconv.FormatUint(uint64(k.ID), 10)+" "+k.Alg+" "+hex.EncodeToString(h[:]))
	}
	add("hmac", keys)
	routes := make([]string, len(n.Routes))
	for i, r := range n.Routes {
		routes[i] = routeReference(r)
	}
	add("route", routes)
	rules := make([]string, len(n.Rules))
	for i, r := range n.Rules {
		rules[i] = r.Key()
	}
	add("rule", rules)
	var svcs []string
	for _, s := range n.Services {
		var spec bytes.Buffer
		if len(s.Spec) > 0 && json.Compact(&spec, s.Spec) != nil {
			spec.Reset()
			spec.Write(s.Spec)
		}
		svcs = append(svcs, s.Kind+" "+s.SID.Masked().String()+" "+spec.String())
	}
	for _, s := range svcs {
		lines = append(lines, "service "+s)
	}
	lines = append(lines, "boundary "+n.Boundary.String())
	lines = append(lines, "bgp "+n.BGP.String())
	var faults []string
	for kind, fs := range n.Faults {
		for _, f := range fs {
			faults = append(faults, kind+" "+f)
		}
	}
	add("fault", faults)
	var foreign []string
	for _, f := range n.Foreign {
		foreign = append(foreign, strconv.Itoa(f.Protocol)+" "+routeReference(f.Route))
	}
	add("foreign", foreign)
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
