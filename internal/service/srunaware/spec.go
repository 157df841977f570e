package srunaware

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Canonical behaviour names (iproute2-style spellings).
const (
	EndAS  = "End.AS"
	EndAD  = "End.AD"
	EndEAD = "End.EAD"
	EndAM  = "End.AM"
)

// Behaviors lists every spelling `segchain sid add` accepts for a proxy;
// End.AD4/End.AD6/End.EAD4/End.EAD6 fix the inner type.
var Behaviors = []string{EndAS, EndAD, "End.AD4", "End.AD6", EndEAD, "End.EAD4", "End.EAD6", EndAM}

// Inner is the type of the packet a proxy hands to the SF.
type Inner uint8

// Inner packet types (values shared with the eBPF program's enum
// proxy_inner: internal/dataplane/srunaware's TestInnerMatchesProgram fails on drift).
const (
	InnerAny      Inner = 0
	InnerIPv6     Inner = 1
	InnerIPv4     Inner = 2
	InnerEthernet Inner = 3
)

func (i Inner) String() string {
	switch i {
	case InnerIPv6:
		return "ipv6"
	case InnerIPv4:
		return "ipv4"
	case InnerEthernet:
		return "ethernet"
	}
	return "any"
}

// Spec is one proxy SID: everything `sid add` or the planner specifies.
type Spec struct {
	SID      netip.Prefix     `json:"sid"`
	Behavior string           `json:"behavior"` // End.AS, End.AD, End.EAD or End.AM
	Inner    Inner            `json:"-"`
	NH       netip.Addr       `json:"nh,omitzero"`   // S-ADDR as an IP next hop ...
	MAC      net.HardwareAddr `json:"mac,omitempty"` // ... or as a MAC
	OIF      string           `json:"oif"`           // IFACE-OUT, towards the SF
	IIF      string           `json:"iif"`           // IFACE-IN, from the SF
	// End.AS only: the configured CACHE.
	Src  netip.Addr   `json:"src,omitzero"`
	Segs []netip.Addr `json:"segs,omitempty"` // path order: Segs[0] is the next SID
	Tag  uint16       `json:"tag,omitempty"`
	// End.AD/End.EAD per-flow variant.
	Flow        bool          `json:"flow,omitempty"`
	FlowTimeout time.Duration `json:"flow_timeout,omitempty"`
	// FlowMax caps the flows this SID caches (its own hash of that size;
	// 0: the node-wide LRU shared by all SIDs).
	FlowMax uint32 `json:"flow_max,omitempty"`
	// CSIDLBLen/CSIDNFLen (bits) make SID a uSID (RFC 9800 NEXT-C-SID,
	// docs/usid.md): SID is block:uSID::, it matches whatever uSIDs follow
	// in the DA, and End shifts the container. 0 for a full SID.
	CSIDLBLen int `json:"csid_lblen,omitempty"`
	CSIDNFLen int `json:"csid_nflen,omitempty"`
}

// Params renders the spec in the canonical `sid add` syntax, without the SID
// and behaviour (parsing the result gives the same Spec).
func (s Spec) Params() []string {
	var p []string
	if s.Behavior != EndAM {
		p = append(p, "inner", s.Inner.String())
	}
	switch {
	case s.MAC != nil:
		p = append(p, "mac", s.MAC.String())
	case s.NH.Is4():
		p = append(p, "nh4", s.NH.String())
	case s.NH.IsValid():
		p = append(p, "nh6", s.NH.String())
	}
	p = append(p, "oif", s.OIF, "iif", s.IIF)
	if s.Behavior == EndAS {
		segs := make([]string, len(s.Segs))
		for i, a := range s.Segs {
			segs[i] = a.String()
		}
		p = append(p, "src", s.Src.String(), "segs", strings.Join(segs, ","))
		if s.Tag != 0 {
			p = append(p, "tag", strconv.Itoa(int(s.Tag)))
		}
	}
	if s.CSIDNFLen > 0 {
		p = append(p, "usid", fmt.Sprintf("%d/%d", s.CSIDLBLen, s.CSIDNFLen))
	}
	if s.Flow {
		p = append(p, "flow")
		if s.FlowMax > 0 {
			p = append(p, "max", strconv.FormatUint(uint64(s.FlowMax), 10))
		}
		if s.FlowTimeout > 0 {
			p = append(p, "timeout", strconv.Itoa(int(s.FlowTimeout/time.Second)))
		}
	}
	return p
}

// String is the spec as one `sid add` line.
func (s Spec) String() string {
	return s.SID.String() + " " + s.Behavior + " " + strings.Join(s.Params(), " ")
}

// canonical maps every accepted spelling (lower case) to the canonical
// behaviour and the inner type the spelling implies (InnerAny = not implied).
var canonical = map[string]struct {
	name  string
	inner Inner
}{
	"end.as": {EndAS, InnerAny}, "end.ad": {EndAD, InnerAny}, "end.ead": {EndEAD, InnerAny},
	"end.ad4": {EndAD, InnerIPv4}, "end.ad6": {EndAD, InnerIPv6},
	"end.ead4": {EndEAD, InnerIPv4}, "end.ead6": {EndEAD, InnerIPv6},
	"end.am": {EndAM, InnerIPv6},
}

// ParseSpec parses the parameters of a proxy behaviour in the `sid add`
// keyword syntax, or in srconf's positional form `ip|mac ADDR OIF IIF`.
func ParseSpec(sid netip.Prefix, behavior string, params []string) (Spec, error) {
	c, ok := canonical[strings.ToLower(behavior)]
	if !ok {
		return Spec{}, fmt.Errorf("behaviour %q is not an SR proxy (want one of %s)", behavior, strings.Join(Behaviors, ", "))
	}
	if !sid.IsValid() || !sid.Addr().Is6() || sid.Bits() != 128 {
		return Spec{}, fmt.Errorf("sid %s: a proxy SID must be an IPv6 /128", sid)
	}
	s := Spec{SID: sid, Behavior: c.name, Inner: c.inner}
	if len(params) == 4 && (params[0] == "ip" || params[0] == "mac") {
		// srconf: end.ad6 ip ADDR OIF IIF
		params = []string{params[0], params[1], "oif", params[2], "iif", params[3]}
	}
	seen := map[string]bool{}
	for i := 0; i < len(params); i++ {
		kw := params[i]
		if seen[kw] {
			return Spec{}, fmt.Errorf("%s: %q given twice", c.name, kw)
		}
		seen[kw] = true
		if kw == "flow" {
			s.Flow = true
			continue
		}
		if i+1 >= len(params) {
			return Spec{}, fmt.Errorf("%s: %q needs a value", c.name, kw)
		}
		v := params[i+1]
		i++
		var err error
		switch kw {
		case "inner":
			var in Inner
			switch v {
			case "ipv6":
				in = InnerIPv6
			case "ipv4":
				in = InnerIPv4
			case "ethernet":
				in = InnerEthernet
			default:
				return Spec{}, fmt.Errorf("%s: inner %q: want ipv6, ipv4 or ethernet", c.name, v)
			}
			if s.Inner != InnerAny && s.Inner != in {
				return Spec{}, fmt.Errorf("%s: inner %s contradicts %s", c.name, v, behavior)
			}
			s.Inner = in
		case "nh6", "nh4", "ip":
			if s.NH.IsValid() || s.MAC != nil {
				return Spec{}, fmt.Errorf("%s: give one S-ADDR (nh6, nh4 or mac)", c.name)
			}
			if s.NH, err = netip.ParseAddr(v); err != nil {
				return Spec{}, fmt.Errorf("%s: %s: %w", c.name, kw, err)
			}
			if (kw == "nh6" && !s.NH.Is6()) || (kw == "nh4" && !s.NH.Is4()) {
				return Spec{}, fmt.Errorf("%s: %s %s: wrong address family", c.name, kw, v)
			}
		case "mac":
			if s.NH.IsValid() || s.MAC != nil {
				return Spec{}, fmt.Errorf("%s: give one S-ADDR (nh6, nh4 or mac)", c.name)
			}
			if s.MAC, err = net.ParseMAC(v); err != nil || len(s.MAC) != 6 {
				return Spec{}, fmt.Errorf("%s: mac %q: not an Ethernet address", c.name, v)
			}
		case "oif":
			s.OIF = v
		case "iif":
			s.IIF = v
		case "src":
			if s.Src, err = netip.ParseAddr(v); err != nil || !s.Src.Is6() {
				return Spec{}, fmt.Errorf("%s: src %q: want an IPv6 address", c.name, v)
			}
		case "segs":
			for _, f := range strings.Split(v, ",") {
				a, err := netip.ParseAddr(f)
				if err != nil || !a.Is6() {
					return Spec{}, fmt.Errorf("%s: segs: %q is not an IPv6 address", c.name, f)
				}
				s.Segs = append(s.Segs, a)
			}
		case "tag":
			t, err := strconv.ParseUint(v, 0, 16)
			if err != nil {
				return Spec{}, fmt.Errorf("%s: tag %q: %w", c.name, v, err)
			}
			s.Tag = uint16(t)
		case "usid":
			if _, err := fmt.Sscanf(v, "%d/%d", &s.CSIDLBLen, &s.CSIDNFLen); err != nil {
				return Spec{}, fmt.Errorf("%s: usid %q: want LBLEN/NFLEN bits (32/16)", c.name, v)
			}
		case "max":
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil || n == 0 || n > FlowsMax {
				return Spec{}, fmt.Errorf("%s: max %q: want 1..%d flows", c.name, v, FlowsMax)
			}
			s.FlowMax = uint32(n)
		case "timeout":
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil || n == 0 {
				return Spec{}, fmt.Errorf("%s: timeout %q: want seconds > 0", c.name, v)
			}
			s.FlowTimeout = time.Duration(n) * time.Second
		default:
			return Spec{}, fmt.Errorf("%s: unknown parameter %q", c.name, kw)
		}
	}
	return s, s.Validate()
}

// Validate checks the research's constraints on one spec.
func (s Spec) Validate() error {
	var errs []error
	if s.OIF == "" || s.IIF == "" {
		errs = append(errs, errors.New("oif and iif are required"))
	}
	if s.Inner == InnerAny {
		errs = append(errs, errors.New("inner ipv6|ipv4|ethernet is required"))
	}
	switch {
	case s.Inner == InnerEthernet:
		// The frame goes to the SF as it arrived, its own MACs included.
		if s.NH.IsValid() || s.MAC != nil {
			errs = append(errs, errors.New("inner ethernet takes no S-ADDR (nh4/nh6/mac): the frame keeps its own L2 header"))
		}
		if s.Flow {
			errs = append(errs, errors.New("inner ethernet: flow keys on the inner IP 5-tuple; not for frames"))
		}
	case !s.NH.IsValid() && s.MAC == nil:
		errs = append(errs, errors.New("an S-ADDR (nh6 ADDR, nh4 ADDR or mac MAC) is required"))
	case s.Behavior == EndAM && s.NH.Is4():
		errs = append(errs, errors.New("End.AM serves IPv6 only: use nh6 or mac"))
	case s.Inner == InnerIPv4 && s.NH.Is6():
		// bpf_redirect_neigh can resolve an IPv6 next hop for IPv4; allowed.
	case s.Inner == InnerIPv6 && s.NH.Is4():
		errs = append(errs, errors.New("inner ipv6 needs nh6 (or mac)"))
	}
	if s.Behavior == EndAS {
		if !s.Src.IsValid() || len(s.Segs) == 0 {
			errs = append(errs, errors.New("End.AS needs src ADDR and segs S1,...,Sn (the CACHE)"))
		}
		if len(s.Segs) > maxSegs {
			errs = append(errs, fmt.Errorf("End.AS: at most %d segs", maxSegs))
		}
	} else if s.Src.IsValid() || len(s.Segs) > 0 || s.Tag != 0 {
		errs = append(errs, fmt.Errorf("%s: src, segs and tag belong to End.AS", s.Behavior))
	}
	errs = append(errs, s.validateCSID()...)
	if (s.Flow || s.FlowTimeout > 0) && s.Behavior != EndAD && s.Behavior != EndEAD {
		errs = append(errs, fmt.Errorf("%s: flow belongs to End.AD/End.EAD", s.Behavior))
	}
	if s.FlowTimeout > 0 && !s.Flow {
		errs = append(errs, errors.New("timeout needs flow"))
	}
	if s.FlowMax > 0 && !s.Flow {
		errs = append(errs, errors.New("max needs flow"))
	}
	if s.FlowMax > 0 && s.FlowTimeout == 0 {
		// A full capped cache frees expired flows; without a timeout the
		// flows that ended would hold their slots forever.
		errs = append(errs, errors.New("flow max needs flow timeout SECONDS"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s %s: %w", s.SID, s.Behavior, err)
	}
	return nil
}

// FlowsMax is the largest `flow max` a per-flow SID may have: the size of
// the node-wide per-flow cache (PROXY_FLOWS_MAX of bpf/proxy_tc.bpf.c;
// internal/dataplane/srunaware's TestSpecLimitsMatchProgram fails on drift).
const FlowsMax = 65536

// CacheHdrMax is the bytes of outer headers a proxy cache holds (the Hdr
// array of the program's struct proxy_cache; checked like FlowsMax).
const CacheHdrMax = 512

// maxSegs keeps a configured End.AS header within the program's cache.
const maxSegs = (CacheHdrMax - 40 - 8) / 16

// Equal reports whether two specs configure the same proxy.
func (s Spec) Equal(o Spec) bool {
	return slices.Equal(s.Params(), o.Params()) && s.SID == o.SID && s.Behavior == o.Behavior
}

// validateCSID checks a uSID spec: lengths the program can shift (whole
// bytes, as the kernel's next-csid requires) and a SID that is only a
// block and one C-SID.
func (s Spec) validateCSID() []error {
	if s.CSIDLBLen == 0 && s.CSIDNFLen == 0 {
		return nil
	}
	lb, nf := s.CSIDLBLen, s.CSIDNFLen
	if lb <= 0 || nf <= 0 || lb%8 != 0 || nf%8 != 0 || lb+nf >= 128 {
		return []error{fmt.Errorf("usid %d/%d: want multiples of 8 bits, block + C-SID < 128", lb, nf)}
	}
	a := s.SID.Addr().As16()
	for _, b := range a[(lb+nf)/8:] {
		if b != 0 {
			return []error{fmt.Errorf("usid %d/%d: a uSID SID is block:uSID:: (bits after %d must be 0)", lb, nf, lb+nf)}
		}
	}
	return nil
}
