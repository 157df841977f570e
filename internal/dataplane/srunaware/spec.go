package srunaware

import (
	"net/netip"

	"github.com/segchain/segchain/internal/service/srunaware"
)

// The proxy spec is plain data shared with config and plan, so it lives in
// the sr-unaware kind's pure package; these names keep the data path's
// spelling.

// Canonical behaviour names (iproute2-style spellings).
const (
	EndAS  = srunaware.EndAS
	EndAD  = srunaware.EndAD
	EndEAD = srunaware.EndEAD
	EndAM  = srunaware.EndAM
)

// Behaviors lists every spelling `segchain sid add` accepts for a proxy.
var Behaviors = srunaware.Behaviors

// Inner is the type of the packet a proxy hands to the SF.
type Inner = srunaware.Inner

// Inner packet types.
const (
	InnerAny      = srunaware.InnerAny
	InnerIPv6     = srunaware.InnerIPv6
	InnerIPv4     = srunaware.InnerIPv4
	InnerEthernet = srunaware.InnerEthernet
)

// Spec is one proxy SID: everything `sid add` or the planner specifies.
type Spec = srunaware.Spec

// ParseSpec parses the parameters of a proxy behaviour (srunaware.ParseSpec).
func ParseSpec(sid netip.Prefix, behavior string, params []string) (Spec, error) {
	return srunaware.ParseSpec(sid, behavior, params)
}

// FlowsMax is the largest `flow max` a per-flow SID may have.
const FlowsMax = srunaware.FlowsMax
