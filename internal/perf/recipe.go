package perf

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

// Params are the per-experiment knobs a recipe may use.
type Params struct {
	// Size of the innermost IP packet in bytes (64 = the thesis' packet).
	Size int
	// Rules is the rule count for recipes that have rules (firewalls).
	Rules int
}

// Recipe configures one behaviour on the SUT and builds the frame that
// exercises it. Several recipes coexist in one SUT (sandwich interleaving
// switches between them within a run), so a recipe uses only the addresses
// of its index k (see Addr) and the shared base routes of PrepareSUT.
type Recipe interface {
	// Name is the behaviour, spelled as iproute2 does ("End.DX6").
	Name() string
	// Describe is a one-line summary for `segchain perf ls`.
	Describe() string
	// Setup configures the SUT and returns the Ethernet frame to send
	// (destination MAC env.InMAC). An error wrapping ErrNotSupported skips
	// the recipe with its reason.
	Setup(env *Env, k int, p Params) ([]byte, error)
}

// Registry holds recipes by name. It is a value, not a global: callers
// build one from constructors (NativeRecipes, and other packages' own).
type Registry struct {
	byName map[string]Recipe
}

// NewRegistry returns a registry holding rs.
func NewRegistry(rs ...Recipe) (*Registry, error) {
	r := &Registry{byName: map[string]Recipe{}}
	return r, r.Add(rs...)
}

// Add registers recipes; a duplicate name is an error.
func (r *Registry) Add(rs ...Recipe) error {
	for _, x := range rs {
		if _, dup := r.byName[x.Name()]; dup {
			return fmt.Errorf("recipe %q registered twice", x.Name())
		}
		r.byName[x.Name()] = x
	}
	return nil
}

// Get returns the named recipe.
func (r *Registry) Get(name string) (Recipe, error) {
	x, ok := r.byName[name]
	if !ok {
		return nil, fmt.Errorf("unknown behaviour %q (see segchain perf ls)", name)
	}
	return x, nil
}

// List returns every recipe sorted by name.
func (r *Registry) List() []Recipe {
	out := make([]Recipe, 0, len(r.byName))
	for _, x := range r.byName {
		out = append(out, x)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// Address plan. Index k (1..250) of a recipe selects its own addresses.
// The shared routes of PrepareSUT send every final destination and every
// SID beyond the SUT to the rx port.
var (
	src6   = netip.MustParseAddr(TesterTx6)
	src4   = netip.MustParseAddr(TesterTx4)
	farNH6 = netip.MustParseAddr("fc00:c00::2") // a next hop behind a /128 gateway route
	farNH4 = netip.MustParseAddr("10.3.0.2")    // the same for End.DX4
	rxHop6 = netip.MustParseAddr(TesterRx6)
	rxHop4 = netip.MustParseAddr(TesterRx4)
)

// Addr returns address number n of kind in recipe k's space:
//
//	dst  fc00:100:K::N   final destinations (routed to the rx port)
//	far  fc00:b00:K::N   SIDs beyond the SUT (routed to the rx port)
//	sid  fc00:a:K::N     local SIDs of the SUT
//	hx   fc00:2K::N      headend-steered destinations (K = 00..ff)
func Addr(kind string, k, n int) netip.Addr {
	var s string
	switch kind {
	case "dst":
		s = fmt.Sprintf("fc00:100:%x::%x", k, n)
	case "far":
		s = fmt.Sprintf("fc00:b00:%x::%x", k, n)
	case "sid":
		s = fmt.Sprintf("fc00:a:%x::%x", k, n)
	case "hx":
		s = fmt.Sprintf("fc00:200:%x::%x", k, n)
	default:
		panic("perf.Addr: unknown kind " + kind)
	}
	return netip.MustParseAddr(s)
}

// Addr4 returns 10.100.K.N, an IPv4 final destination of recipe k.
func Addr4(k, n int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 100, byte(k), byte(n)})
}

// PrepareSUT installs the routes every recipe relies on: final
// destinations and far SIDs to the rx port, and the /128 gateway route of
// the non-on-link next hops (an on-link nh6 costs End.X/End.DX6 a route
// cache entry per packet; with an on-link nh4, End.DX4 resolves the inner
// packet's destination as the neighbour and the packet waits for ARP).
func PrepareSUT(env *Env) error {
	cmds := [][]string{
		{"ip", "-6", "route", "replace", "fc00:100::/32", "via", TesterRx6, "dev", env.Out},
		{"ip", "-6", "route", "replace", "fc00:b00::/32", "via", TesterRx6, "dev", env.Out},
		{"ip", "-6", "route", "replace", farNH6.String() + "/128", "via", TesterRx6, "dev", env.Out},
		{"ip", "-4", "route", "replace", "10.100.0.0/16", "via", TesterRx4, "dev", env.Out},
		{"ip", "-4", "route", "replace", farNH4.String() + "/32", "via", TesterRx4, "dev", env.Out},
		{"ip", "-4", "route", "replace", farNH4.String() + "/32", "via", TesterRx4, "dev", env.Out},
	}
	for _, c := range cmds {
		if _, err := env.Run(c...); err != nil {
			return fmt.Errorf("prepare SUT: %w", err)
		}
	}
	return nil
}

// frame6/frame4 wrap an L3 packet for the SUT's input port.
func frame6(env *Env, l3 []byte) []byte { return ether(env.InMAC, env.TxMAC, etherIPv6, l3) }
func frame4(env *Env, l3 []byte) []byte { return ether(env.InMAC, env.TxMAC, etherIPv4, l3) }

func frame6e(env *Env, l3 []byte, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	return frame6(env, l3), nil
}

// runAll runs commands on the SUT, mapping a kernel refusal to
// ErrNotSupported when notSupported matches the output.
func runAll(env *Env, cmds ...[]string) error {
	for _, c := range cmds {
		if out, err := env.Run(c...); err != nil {
			return classify(err, out)
		}
	}
	return nil
}

func classify(err error, out string) error {
	for _, s := range []string{"Operation not supported", "not supported"} {
		if strings.Contains(out, s) || strings.Contains(err.Error(), s) {
			return fmt.Errorf("%w: %v", ErrNotSupported, err)
		}
	}
	return err
}

// IsNotSupported reports whether err means "skip with a reason".
func IsNotSupported(err error) bool { return errors.Is(err, ErrNotSupported) }
