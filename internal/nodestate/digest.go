package nodestate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strconv"
)

// Digest is a SHA-256 (hex, 128 bits) of what a controller compares of
// node n against the desired state want (controller.Compute): sysctls
// (want's keys), the tunnel source (when want sets one), HMAC keys with
// their secrets, routes (String: Owner left out), rules, services,
// the boundary filter, the BGP intent, and, of observed state, faults
// and foreign SIDs. Digest(observed, want) == Digest(want, want) means
// the node is as desired: an apply has nothing to change there, and a
// controller need not fetch its state (docs/scale.md, "Incremental
// observation").
//
// The converse does not hold: state the diff would accept as equal
// (services the kind calls the same in another spelling, HMAC keys want
// does not name, a tunnel source want leaves alone but one is set)
// digests differently, and the controller then fetches and diffs in full,
// as without digests. Only equality is a shortcut.
func Digest(n, want *Node) string {
	if n == nil {
		n = &Node{}
	}
	if want == nil {
		want = &Node{}
	}
	// The text hashed is one line per item, "KIND ITEM\n", each kind's
	// items sorted (a set: duplicates once) but the services'; built in
	// one buffer (every request of every no-op digests a node).
	buf := make([]byte, 0, 128*(len(n.Routes)+len(n.Rules)+len(want.Sysctls)+8))
	line := func(kind, it string) {
		buf = append(buf, kind...)
		buf = append(buf, ' ')
		buf = append(buf, it...)
		buf = append(buf, '\n')
	}
	add := func(kind string, items []string) {
		sort.Strings(items)
		for i, it := range items {
			if i > 0 && it == items[i-1] {
				continue // a set: duplicates compare as one (rules)
			}
			line(kind, it)
		}
	}
	var sys []string
	if len(want.Sysctls) > 0 {
		got := make(map[string]string, len(n.Sysctls))
		for _, s := range n.Sysctls {
			got[s.Key] = s.Value
		}
		sys = make([]string, 0, len(want.Sysctls))
		for _, s := range want.Sysctls {
			sys = append(sys, s.Key+"="+got[s.Key])
		}
	}
	add("sysctl", sys)
	if want.TunSrc != "" {
		line("tunsrc", n.TunSrc)
	}
	var keys []string
	for _, k := range n.HMACKeys {
		h := sha256.Sum256(k.Secret)
		keys = append(keys, strconv.FormatUint(uint64(k.ID), 10)+" "+k.Alg+" "+hex.EncodeToString(h[:]))
	}
	add("hmac", keys)
	// Routes are a set keyed by Key (which String determines): a
	// duplicate would be one route to the kernel too. Rendered into one
	// shared buffer, the strings sliced from it.
	routes := make([]string, len(n.Routes))
	text := make([]byte, 0, 80*len(n.Routes))
	ends := make([]int, len(n.Routes))
	for i, r := range n.Routes {
		text = r.appendTo(text)
		ends[i] = len(text)
	}
	all := string(text)
	for i := range routes {
		start := 0
		if i > 0 {
			start = ends[i-1]
		}
		routes[i] = all[start:ends[i]]
	}
	add("route", routes)
	rules := make([]string, len(n.Rules))
	for i, r := range n.Rules {
		rules[i] = r.Key()
	}
	add("rule", rules)
	// Services keep their order within a kind (stage compares lists).
	for _, s := range n.Services {
		var spec bytes.Buffer
		if len(s.Spec) > 0 && json.Compact(&spec, s.Spec) != nil {
			spec.Reset()
			spec.Write(s.Spec)
		}
		line("service", s.Kind+" "+s.SID.Masked().String()+" "+spec.String())
	}
	line("boundary", n.Boundary.String())
	line("bgp", n.BGP.String())
	var faults []string
	for kind, fs := range n.Faults {
		for _, f := range fs {
			faults = append(faults, kind+" "+f)
		}
	}
	add("fault", faults)
	var foreign []string
	for _, f := range n.Foreign {
		foreign = append(foreign, strconv.Itoa(f.Protocol)+" "+f.Route.String())
	}
	add("foreign", foreign)
	h := sha256.Sum256(buf)
	return hex.EncodeToString(h[:16])
}

// DigestWant is what Digest needs of a desired state besides the kernel:
// its name, sysctl keys and tunnel source (the agent is sent only this).
func DigestWant(want *Node) *Node {
	if want == nil {
		return nil
	}
	return &Node{Name: want.Name, Sysctls: want.Sysctls, TunSrc: want.TunSrc}
}

// Digest is the desired state's own digest: Digest(n, n).
func (n *Node) Digest() string { return Digest(n, n) }
