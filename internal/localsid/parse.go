package localsid

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/segchain/segchain/internal/nodestate"
)

// ErrUnknownBehavior is returned (wrapped) by Parse when the behaviour is not
// a native seg6local behaviour; the CLI then asks its extensions.
var ErrUnknownBehavior = errors.New("unknown behaviour")

// DefaultDev is the route device Parse leaves when `dev` is not given: the
// data path then installs the SID as a local route on lo (`ip -6 route add
// local SID encap seg6local ... dev lo`), the one rule of `sid add` and
// `apply` (a unicast route on lo would be a reject route, RTF_REJECT).
const DefaultDev = ""

// ParseSID parses SID[/LEN]; a SID without a length is a /128. The prefix is
// returned masked, as the kernel stores it.
func ParseSID(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is6() || a.Is4In6() {
			return netip.Prefix{}, fmt.Errorf("sid %q: not an IPv6 address", s)
		}
		return netip.PrefixFrom(a, 128), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is6() || p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("sid %q: not an IPv6 prefix", s)
	}
	return p.Masked(), nil
}

// CanonicalBehavior returns the iproute2 spelling of a native behaviour name
// given in any case or as an alias, or "" if it is not native.
func CanonicalBehavior(name string) string {
	if b, ok := Lookup(name); ok {
		return b.Name
	}
	return ""
}

// Parse turns `SID[/LEN] BEHAVIOR PARAMS...` into the seg6local route that
// implements it (device DefaultDev unless `dev` is given; counters on unless
// `nocount`). Parameters use iproute2 keywords; srconf's positional forms
// (`ip ADDR` for the next hop, a bare interface name for oif) are accepted
// too. Every behaviour's required and allowed parameters are checked.
func Parse(args []string) (nodestate.Route, error) {
	var r nodestate.Route
	if len(args) < 2 {
		return r, errors.New("usage: SID[/LEN] BEHAVIOR [PARAMS...]")
	}
	sid, err := ParseSID(args[0])
	if err != nil {
		return r, err
	}
	b, ok := Lookup(args[1])
	if !ok {
		return r, fmt.Errorf("%q: %w (native behaviours: %s)", args[1], ErrUnknownBehavior, nativeNames())
	}
	l := &nodestate.Seg6Local{Action: b.Name, Count: true}
	r = nodestate.Route{Dst: sid, Dev: DefaultDev, Seg6Local: l}

	seen := map[Param]bool{}
	set := func(p Param) error {
		if !b.allows(p) {
			return fmt.Errorf("%s is not a parameter of %s (%s)", p, b.Name, b.Synopsis())
		}
		if seen[p] {
			return fmt.Errorf("%s given twice", p)
		}
		seen[p] = true
		return nil
	}
	rest := args[2:]
	value := func(i int, kw string) (string, error) {
		if i+1 >= len(rest) {
			return "", fmt.Errorf("%s needs a value", kw)
		}
		return rest[i+1], nil
	}
	for i := 0; i < len(rest); i++ {
		kw := rest[i]
		switch kw {
		case "count":
			l.Count = true
			continue
		case "nocount":
			l.Count = false
			continue
		case "srh": // iproute2: `srh segs S1,S2 [hmac N]`
			if i+1 >= len(rest) || rest[i+1] != "segs" {
				return r, errors.New("srh must be followed by segs")
			}
			continue
		}
		if !isKeyword(kw) {
			// srconf's positional forms: `end.dx2 OIF` and
			// `end.dx6 ip ADDR OIF` name the outgoing interface bare.
			if !(i == 0 && b.Name == "End.DX2") && !(i >= 2 && rest[i-2] == "ip") {
				return r, fmt.Errorf("unknown parameter %q for %s (%s)", kw, b.Name, b.Synopsis())
			}
			if err := set(POif); err != nil {
				return r, err
			}
			l.Oif = kw
			continue
		}
		v, err := value(i, kw)
		if err != nil {
			return r, err
		}
		switch kw {
		case "dev":
			if r.Dev != DefaultDev {
				return r, errors.New("dev given twice")
			}
			if v == "" {
				return r, errors.New("dev needs a device name")
			}
			r.Dev = v
		case "nh4", "nh6", "ip":
			a, err := netip.ParseAddr(v)
			if err != nil {
				return r, fmt.Errorf("%s %q: not an address", kw, v)
			}
			p := PNh6
			if a.Is4() {
				p = PNh4
			}
			if kw != "ip" && Param(kw) != p {
				return r, fmt.Errorf("%s %q: wrong address family", kw, v)
			}
			if err := set(p); err != nil {
				return r, err
			}
			if a.Is4() {
				l.Nh4 = a
			} else {
				l.Nh6 = a
			}
		case "oif", "iif":
			if err := set(Param(kw)); err != nil {
				return r, err
			}
			if kw == "oif" {
				l.Oif = v
			} else {
				l.Iif = v
			}
		case "table":
			if err := set(PTable); err != nil {
				return r, err
			}
			if l.Table, err = parseTable(v); err != nil {
				return r, err
			}
		case "vrftable":
			if err := set(PVRFTable); err != nil {
				return r, err
			}
			if l.VRFTable, err = parseTable(v); err != nil {
				return r, fmt.Errorf("vrftable: %w", err)
			}
		case "segs":
			if err := set(PSegs); err != nil {
				return r, err
			}
			if l.Segs, err = parseSegs(v); err != nil {
				return r, err
			}
		case "hmac":
			if err := set(PHMAC); err != nil {
				return r, err
			}
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil || n == 0 {
				return r, fmt.Errorf("hmac %q: want a key id 1..4294967295", v)
			}
			l.HMAC = uint32(n)
		case "flavors":
			if err := set(PFlavors); err != nil {
				return r, err
			}
			if l.Flavors, err = parseFlavors(b, v); err != nil {
				return r, err
			}
		case "lblen", "nflen":
			if err := set(Param(kw)); err != nil {
				return r, err
			}
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 || n > 128 || n%8 != 0 {
				return r, fmt.Errorf("%s %q: want bits, a positive multiple of 8 (the kernel's next-csid)", kw, v)
			}
			if kw == "lblen" {
				l.LBLen = n
			} else {
				l.NFLen = n
			}
		case "endpoint":
			if err := set(PEndpoint); err != nil {
				return r, err
			}
			l.BPF = v
		}
		i++
	}
	if seen[PLBLen] || seen[PNFLen] {
		switch {
		case !slices.Contains(l.Flavors, "next-csid"):
			return r, errors.New("lblen and nflen are next-csid's lengths: give flavors next-csid")
		case !seen[PLBLen] || !seen[PNFLen]:
			return r, errors.New("lblen and nflen go together")
		case l.LBLen+l.NFLen > 128:
			return r, fmt.Errorf("lblen %d + nflen %d > 128", l.LBLen, l.NFLen)
		}
	}
	for _, p := range b.Required {
		if !seen[p] {
			return r, fmt.Errorf("%s requires %s (%s)", b.Name, p, b.Synopsis())
		}
	}
	if len(b.OneOf) > 0 {
		n := 0
		for _, p := range b.OneOf {
			if seen[p] {
				n++
			}
		}
		if n != 1 {
			alt := make([]string, len(b.OneOf))
			for i, p := range b.OneOf {
				alt[i] = string(p)
			}
			return r, fmt.Errorf("%s requires exactly one of %s", b.Name, strings.Join(alt, ", "))
		}
	}
	return r, nil
}

var keywords = map[string]bool{
	"dev": true, "nh4": true, "nh6": true, "ip": true, "oif": true, "iif": true,
	"table": true, "vrftable": true, "segs": true, "hmac": true, "flavors": true, "endpoint": true,
	"lblen": true, "nflen": true,
}

func isKeyword(s string) bool { return keywords[s] }

func parseTable(v string) (int, error) {
	switch v {
	case "main":
		return 254, nil
	case "local":
		return 255, nil
	case "default":
		return 253, nil
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("table %q: want main, local, default or 1..4294967295", v)
	}
	return int(n), nil
}

func parseSegs(v string) ([]netip.Addr, error) {
	parts := strings.Split(v, ",")
	segs := make([]netip.Addr, 0, len(parts))
	for _, s := range parts {
		a, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil || !a.Is6() || a.Is4In6() {
			return nil, fmt.Errorf("segs: %q is not an IPv6 address", s)
		}
		segs = append(segs, a)
	}
	return segs, nil
}

func parseFlavors(b Behavior, v string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(v, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		ok := false
		for _, g := range b.Flavors {
			ok = ok || f == g
		}
		if !ok {
			return nil, fmt.Errorf("flavor %q: %s accepts %s", f, b.Name, strings.Join(b.Flavors, ", "))
		}
		for _, g := range out {
			if g == f {
				return nil, fmt.Errorf("flavor %s given twice", f)
			}
		}
		out = append(out, f)
	}
	return out, nil
}

func nativeNames() string {
	n := make([]string, len(behaviors))
	for i, b := range behaviors {
		n[i] = b.Name
	}
	return strings.Join(n, ", ")
}
