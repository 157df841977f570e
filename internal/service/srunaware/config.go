package srunaware

import (
	"net/netip"
	"strconv"
	"strings"
)

// SR proxy types of sr-unaware services (RFC 8986 section 4 / the SR proxy
// draft).
const (
	ProxyStatic       = "static"       // End.AS
	ProxyDynamic      = "dynamic"      // End.AD
	ProxyDynamicFlow  = "dynamic-flow" // End.AD with a per-flow cache
	ProxyMasquerading = "masquerading" // End.AM
)

// Inner packet types of sr-unaware services (the `inner:` key).
const (
	InnerTypeIPv4     = "ipv4"
	InnerTypeIPv6     = "ipv6"
	InnerTypeEthernet = "ethernet" // the whole Ethernet frame (l2encap chains)
)

// Config is the proxy of an sr-unaware service, as the domain file gives
// it (inline in the service: proxy, inner, sf_nh6 ...).
type Config struct {
	// Proxy is the proxy type of an sr-unaware service: static, dynamic,
	// dynamic-flow or masquerading.
	Proxy string `yaml:"proxy,omitempty" json:"proxy,omitempty"`
	// Inner is the packet type handed to the SF: ipv4, ipv6 or ethernet
	// (the whole frame of an l2encap chain, its own MACs kept; no SF
	// address). Not for masquerading, which is IPv6 only.
	Inner string `yaml:"inner,omitempty" json:"inner,omitempty"`
	// SFNh6, SFNh4 and SFMac address the SF; exactly one is given (none
	// for inner ethernet).
	SFNh6 string `yaml:"sf_nh6,omitempty" json:"sf_nh6,omitempty"`
	SFNh4 string `yaml:"sf_nh4,omitempty" json:"sf_nh4,omitempty"`
	SFMac string `yaml:"sf_mac,omitempty" json:"sf_mac,omitempty"`
	// IfaceOut (towards the SF) and IfaceIn (from the SF) are interfaces
	// of Node; they may be the same.
	IfaceOut string `yaml:"iface_out,omitempty" json:"iface_out,omitempty"`
	IfaceIn  string `yaml:"iface_in,omitempty" json:"iface_in,omitempty"`
	// FlowTimeout is the idle timeout in seconds of a dynamic-flow proxy's
	// per-flow cache entries (0: the proxy's default).
	FlowTimeout int `yaml:"flow_timeout,omitempty" json:"flow_timeout,omitempty"`
	// FlowMax caps the flows a dynamic-flow proxy caches in a hash of its
	// own (0: the node-wide LRU shared by every per-flow SID). Needs
	// FlowTimeout.
	FlowMax int `yaml:"flow_max,omitempty" json:"flow_max,omitempty"`
}

// Behavior is the proxy behaviour the proxy type derives ("" for an
// unknown type).
func (c *Config) Behavior() string {
	switch c.Proxy {
	case ProxyStatic:
		return EndAS
	case ProxyDynamic, ProxyDynamicFlow:
		return EndAD
	case ProxyMasquerading:
		return EndAM
	}
	return ""
}

// ProxyParams renders the proxy as its parameters in the canonical
// `segchain sid add` order (Spec.Params): the plan emits them and
// validation parses them with ParseSpec. src and segs are a static
// proxy's CACHE (its node's address and the rest of its chain); other
// proxy types ignore them.
func (c *Config) ProxyParams(src netip.Addr, segs []netip.Addr) []string {
	var prm []string
	if c.Proxy != ProxyMasquerading {
		prm = append(prm, "inner", c.Inner)
	}
	switch {
	case c.SFMac != "":
		prm = append(prm, "mac", strings.ToLower(c.SFMac))
	case c.SFNh4 != "":
		prm = append(prm, "nh4", c.SFNh4)
	case c.SFNh6 != "":
		prm = append(prm, "nh6", c.SFNh6)
	}
	prm = append(prm, "oif", c.IfaceOut, "iif", c.IfaceIn)
	switch c.Proxy {
	case ProxyStatic:
		ss := make([]string, len(segs))
		for i, a := range segs {
			ss[i] = a.String()
		}
		prm = append(prm, "src", src.String(), "segs", strings.Join(ss, ","))
	case ProxyDynamicFlow:
		prm = append(prm, "flow")
		if c.FlowMax != 0 {
			prm = append(prm, "max", strconv.Itoa(c.FlowMax))
		}
		if c.FlowTimeout != 0 {
			prm = append(prm, "timeout", strconv.Itoa(c.FlowTimeout))
		}
	}
	return prm
}
