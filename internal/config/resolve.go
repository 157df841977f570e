package config

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/segchain/segchain/internal/sid"
)

// Interface is one end of a link, resolved.
type Interface struct {
	Node string
	Name string
	// PeerNode and PeerName are the other end of the link.
	PeerNode string
	PeerName string
	// Addrs are the link prefixes with the node ID as host part
	// (fc00:12::2/64, 198.18.3.2/24), IPv6 first.
	Addrs []netip.Prefix
	// Link is the index of the link in Domain.Links.
	Link int
}

// EgressKey is the SID table key (Domain.SIDs) of a chain's decapsulating
// egress segment; service SIDs are keyed by the service name.
func EgressKey(chain string) string { return "chains." + chain + ".egress" }

// ReturnKey is the SID table key of a bidirectional chain's return egress
// (the decapsulation at the chain's ingress node).
func ReturnKey(chain string) string { return "chains." + chain + ".return" }

// NodeNames returns the node names sorted.
func (d *Domain) NodeNames() []string {
	names := make([]string, 0, len(d.Nodes))
	for n := range d.Nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Format is the domain's SID format (sid.Default when not set).
func (d *Domain) Format() sid.Format {
	f := sid.Format{LocatorBits: d.SID.LocatorBits, FunctionBits: d.SID.FunctionBits, ArgsBits: d.SID.ArgsBits}
	if f == (sid.Format{}) {
		return sid.Default
	}
	return f
}

// HostAddr returns prefix p with host part id, keeping the prefix length
// (fc00:12::/64 and 2 give fc00:12::2/64).
func HostAddr(p netip.Prefix, id int) (netip.Prefix, error) {
	if !p.IsValid() {
		return netip.Prefix{}, fmt.Errorf("invalid prefix")
	}
	p = p.Masked()
	hostBits := p.Addr().BitLen() - p.Bits()
	if id <= 0 || (hostBits < 63 && int64(id) >= int64(1)<<hostBits) {
		return netip.Prefix{}, fmt.Errorf("node id %d does not fit the %d host bits of %s", id, hostBits, p)
	}
	if p.Addr().Is4() {
		b := p.Addr().As4()
		v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		v |= uint32(id)
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), p.Bits()), nil
	}
	b := p.Addr().As16()
	v := uint64(id)
	for i := 15; i >= 0 && v != 0; i-- {
		b[i] |= byte(v)
		v >>= 8
	}
	return netip.PrefixFrom(netip.AddrFrom16(b), p.Bits()), nil
}

// splitEndpoint splits "node:iface".
func splitEndpoint(s string) (node, iface string, ok bool) {
	node, iface, ok = strings.Cut(s, ":")
	return node, iface, ok && node != "" && iface != ""
}

// Interfaces returns every link end with its derived addresses, sorted by
// node then interface name. Endpoints that do not resolve (unknown node,
// malformed) are skipped: validate the domain first.
func (d *Domain) Interfaces() []Interface {
	var out []Interface
	for li, l := range d.Links {
		if l == nil || len(l.Endpoints) != 2 {
			continue
		}
		var ends [2]Interface
		ok := true
		for j, ep := range l.Endpoints {
			node, iface, good := splitEndpoint(ep)
			n := d.Nodes[node]
			if !good || n == nil {
				ok = false
				break
			}
			ends[j] = Interface{Node: node, Name: iface, Link: li}
			for _, s := range []string{l.IPv6, l.IPv4} {
				if s == "" {
					continue
				}
				p, err := netip.ParsePrefix(s)
				if err != nil {
					continue
				}
				if a, err := HostAddr(p, n.ID); err == nil {
					ends[j].Addrs = append(ends[j].Addrs, a)
				}
			}
		}
		if !ok {
			continue
		}
		ends[0].PeerNode, ends[0].PeerName = ends[1].Node, ends[1].Name
		ends[1].PeerNode, ends[1].PeerName = ends[0].Node, ends[0].Name
		out = append(out, ends[0], ends[1])
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Node != out[j].Node {
			return out[i].Node < out[j].Node
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// NodeAddr is a node's own address: LOC::1 for nodes with a locator (see
// sid.NodeAddr), otherwise the IPv6 (else IPv4) address of its first link in
// file order. The zero Addr when there is none.
func (d *Domain) NodeAddr(node string) netip.Addr {
	n := d.Nodes[node]
	if n == nil {
		return netip.Addr{}
	}
	if n.Locator != "" {
		if loc, err := netip.ParsePrefix(n.Locator); err == nil {
			if a, err := sid.NodeAddr(loc, d.Format()); err == nil {
				return a
			}
		}
		return netip.Addr{}
	}
	var v4 netip.Addr
	for _, l := range d.Links {
		if l == nil || len(l.Endpoints) != 2 {
			continue
		}
		for _, ep := range l.Endpoints {
			if nn, _, ok := splitEndpoint(ep); !ok || nn != node {
				continue
			}
			if p, err := netip.ParsePrefix(l.IPv6); err == nil {
				if a, err := HostAddr(p, n.ID); err == nil {
					return a.Addr()
				}
			}
			if p, err := netip.ParsePrefix(l.IPv4); err == nil && !v4.IsValid() {
				if a, err := HostAddr(p, n.ID); err == nil {
					v4 = a.Addr()
				}
			}
		}
	}
	return v4
}

// Secret reads the secret of HMAC key name: the file's bytes with one
// trailing newline removed; relative paths resolve against d.Dir.
func (d *Domain) Secret(name string) ([]byte, error) {
	k := d.Security.HMAC[name]
	if k == nil {
		return nil, fmt.Errorf("hmac key %q: not defined", name)
	}
	p := k.SecretFile
	if !filepath.IsAbs(p) {
		p = filepath.Join(d.Dir, p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("hmac key %q: %w", name, err)
	}
	b = trimNewline(b)
	if len(b) == 0 {
		return nil, fmt.Errorf("hmac key %q: secret file %s is empty", name, k.SecretFile)
	}
	if len(b) > maxSecret {
		return nil, fmt.Errorf("hmac key %q: secret is %d bytes, at most %d", name, len(b), maxSecret)
	}
	if min := MinSecret(k.Algorithm); min > 0 && len(b) < min {
		return nil, fmt.Errorf("hmac key %q: secret is %d bytes, at least %d for %s (its hash output, RFC 2104 §3): generate one, e.g. head -c 32 /dev/urandom | base64", name, len(b), min, cmp.Or(k.Algorithm, DefaultAlgorithm))
	}
	return b, nil
}

// maxSecret is the kernel's SEG6_HMAC_SECRET_LEN.
const maxSecret = 64

// MinSecret is the shortest secret accepted for an HMAC algorithm: its
// hash output (RFC 2104 §3: shorter keys are strongly discouraged, they
// weaken the function), 20 bytes for sha1 and 32 for sha256, the two the
// kernel's seg6 HMAC offers.
func MinSecret(alg string) int {
	switch cmp.Or(alg, DefaultAlgorithm) {
	case "sha1":
		return 20
	case "sha256":
		return 32
	}
	return 0 // an unknown algorithm is reported at its own path
}

func trimNewline(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b
}

// parseFunction parses a pinned FUNCT: 0x-prefixed hex or decimal.
func parseFunction(s string) (uint64, error) {
	return strconv.ParseUint(s, 0, 64)
}

// sidRequests returns the allocation requests of every node with a locator,
// keyed by node, plus the path of each request for error messages.
func (d *Domain) sidRequests() (map[string][]sid.Request, map[string]string, []error) {
	reqs := map[string][]sid.Request{}
	paths := map[string]string{}
	var errs []error
	add := func(node, name, path, pinSID, pinFunct string) {
		r := sid.Request{Name: name}
		if pinSID != "" {
			a, err := netip.ParseAddr(pinSID)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.sid: %w", path, err))
				return
			}
			r.PinnedSID = a
		}
		if pinFunct != "" {
			v, err := parseFunction(pinFunct)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.function: %w", path, err))
				return
			}
			r.Pinned = &v
		}
		reqs[node] = append(reqs[node], r)
		paths[name] = path
	}
	for _, name := range sortedKeys(d.Services) {
		s := d.Services[name]
		if s == nil {
			continue
		}
		add(s.Node, name, "services."+name, s.SID, s.Function)
	}
	for _, name := range sortedKeys(d.Chains) {
		c := d.Chains[name]
		if c == nil {
			continue
		}
		if c.Egress != nil && c.Egress.Node != "" {
			add(c.Egress.Node, EgressKey(name), "chains."+name+".egress", c.Egress.SID, "")
		}
		if c.Bidirectional && c.Ingress != "" {
			var pin string
			if c.Return != nil {
				pin = c.Return.SID
			}
			add(c.Ingress, ReturnKey(name), "chains."+name+".return", pin, "")
		}
	}
	return reqs, paths, errs
}

// SIDs allocates the SID of every service (keyed by service name) and of
// every chain's egress (EgressKey) and return egress (ReturnKey), per node
// with sid.Allocate in the node's locator. Deterministic and stable.
func (d *Domain) SIDs() (map[string]netip.Addr, error) {
	reqs, paths, errs := d.sidRequests()
	out := map[string]netip.Addr{}
	f := d.Format()
	nodes := make([]string, 0, len(reqs))
	for n := range reqs {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, node := range nodes {
		n := d.Nodes[node]
		if n == nil || n.Locator == "" {
			for _, r := range reqs[node] {
				errs = append(errs, fmt.Errorf("%s: node %q has no locator", paths[r.Name], node))
			}
			continue
		}
		loc, err := netip.ParsePrefix(n.Locator)
		if err != nil {
			errs = append(errs, fmt.Errorf("nodes.%s.locator: %w", node, err))
			continue
		}
		m, err := sid.Allocate(node, loc, f, reqs[node])
		if err != nil {
			errs = append(errs, err)
		}
		for k, v := range m {
			out[k] = v
		}
	}
	return out, errors.Join(errs...)
}

// SIDPrefix is the route prefix of a SID in this domain's format
// (sid.Prefix).
func (d *Domain) SIDPrefix(a netip.Addr) netip.Prefix { return sid.Prefix(a, d.Format()) }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
