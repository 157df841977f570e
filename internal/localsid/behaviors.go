package localsid

import (
	"fmt"
	"sort"
	"strings"
)

// Param names a seg6local parameter keyword as iproute2 spells it.
type Param string

// Parameter keywords understood by Parse. Count is always allowed; Dev is
// the route's device, not a behaviour parameter.
const (
	PNh4      Param = "nh4"
	PNh6      Param = "nh6"
	POif      Param = "oif"
	PIif      Param = "iif"
	PTable    Param = "table"
	PVRFTable Param = "vrftable"
	PSegs     Param = "segs"
	PHMAC     Param = "hmac"
	PFlavors  Param = "flavors"
	PLBLen    Param = "lblen" // NEXT-C-SID's Locator-Block bits (with next-csid)
	PNFLen    Param = "nflen" // NEXT-C-SID's Locator-Node+Function bits
	PEndpoint Param = "endpoint"
)

// Behavior describes one native seg6local behaviour: the parameters it
// requires, the ones it accepts, and what the kernel here needs for it.
type Behavior struct {
	Name     string // iproute2 spelling, e.g. "End.DX6"
	Aliases  []string
	Required []Param // all of these must be given
	OneOf    []Param // exactly one of these must be given (End.DT6)
	Optional []Param
	// Flavors lists the flavors the kernel accepts for this behaviour.
	Flavors []string
	// NeedsVRF is set when the behaviour only works with VRF devices.
	NeedsVRF bool
	Summary  string
	Example  string
}

// Behaviors is the table of native seg6local behaviours segchain sid can
// program, in the order the manual lists them. Required/optional sets follow
// the kernel's seg6_local action descriptors: the kernel silently ignores
// attributes a behaviour does not use, so Parse rejects them instead.
var behaviors = []Behavior{
	{Name: "End", Optional: []Param{PFlavors, PLBLen, PNFLen}, Flavors: []string{"psp", "usp", "usd", "next-csid"},
		Summary: "endpoint: SL--, DA <- next SID, forward by the new DA",
		Example: "fc00:2::100 End"},
	{Name: "End.X", Required: []Param{PNh6}, Optional: []Param{POif, PFlavors, PLBLen, PNFLen}, Flavors: []string{"psp", "usp", "usd", "next-csid"},
		Summary: "endpoint with L3 cross-connect: End, then forward to nh6",
		Example: "fc00:2::101 End.X nh6 fc00:23::3"},
	{Name: "End.T", Required: []Param{PTable},
		Summary: "endpoint with table lookup: End, then look the new DA up in table",
		Example: "fc00:2::102 End.T table 100"},
	{Name: "End.DX2", Required: []Param{POif},
		Summary: "decapsulate an L2 frame and send it out of oif",
		Example: "fc00:2::103 End.DX2 oif veth1"},
	{Name: "End.DX4", Required: []Param{PNh4}, Optional: []Param{POif},
		Summary: "decapsulate, forward the inner IPv4 packet to nh4",
		Example: "fc00:2::104 End.DX4 nh4 10.0.1.2"},
	{Name: "End.DX6", Required: []Param{PNh6}, Optional: []Param{POif},
		Summary: "decapsulate, forward the inner IPv6 packet to nh6",
		Example: "fc00:2::105 End.DX6 nh6 fc00:24::4"},
	{Name: "End.DT4", Required: []Param{PVRFTable}, NeedsVRF: true,
		Summary: "decapsulate, look the inner IPv4 packet up in a VRF table",
		Example: "fc00:2::106 End.DT4 vrftable 100"},
	{Name: "End.DT6", OneOf: []Param{PTable, PVRFTable},
		Summary: "decapsulate, look the inner IPv6 packet up in table (or a VRF table)",
		Example: "fc00:2::107 End.DT6 table 100"},
	{Name: "End.DT46", Required: []Param{PVRFTable}, NeedsVRF: true,
		Summary: "decapsulate, look the inner IPv4 or IPv6 packet up in a VRF table",
		Example: "fc00:2::108 End.DT46 vrftable 100"},
	{Name: "End.B6", Aliases: []string{"End.B6.Insert"}, Required: []Param{PSegs}, Optional: []Param{PHMAC},
		Summary: "binding SID: insert a new SRH with segs (the packet keeps its SRH below)",
		Example: "fc00:2::109 End.B6 segs fc00:3::100,fc00:4::100"},
	{Name: "End.B6.Encaps", Required: []Param{PSegs}, Optional: []Param{PHMAC},
		Summary: "binding SID: End, then encapsulate in an outer IPv6 header + SRH with segs",
		Example: "fc00:2::10a End.B6.Encaps segs fc00:3::100,fc00:4::100"},
	{Name: "End.BPF", Required: []Param{PEndpoint},
		Summary: "run the pinned lwt_seg6local eBPF program on the packet",
		Example: "fc00:2::10b End.BPF endpoint /sys/fs/bpf/segchain/prog"},
}

// Behaviors returns a copy of the native behaviour table.
func Behaviors() []Behavior { return append([]Behavior(nil), behaviors...) }

// Lookup finds a native behaviour by its iproute2 spelling, case-insensitively,
// or by an alias.
func Lookup(name string) (Behavior, bool) {
	for _, b := range behaviors {
		if strings.EqualFold(b.Name, name) {
			return b, true
		}
		for _, a := range b.Aliases {
			if strings.EqualFold(a, name) {
				return b, true
			}
		}
	}
	return Behavior{}, false
}

// allows reports whether p is a parameter of b.
func (b Behavior) allows(p Param) bool {
	for _, set := range [][]Param{b.Required, b.OneOf, b.Optional} {
		for _, q := range set {
			if q == p {
				return true
			}
		}
	}
	return false
}

// Synopsis renders the behaviour's parameters the way the manual shows them:
// "End.X nh6 ADDR [oif DEV] [flavors F,...]".
func (b Behavior) Synopsis() string {
	parts := []string{b.Name}
	for _, p := range b.Required {
		parts = append(parts, string(p)+" "+metaVar(p))
	}
	if len(b.OneOf) > 0 {
		alt := make([]string, len(b.OneOf))
		for i, p := range b.OneOf {
			alt[i] = string(p) + " " + metaVar(p)
		}
		parts = append(parts, "{ "+strings.Join(alt, " | ")+" }")
	}
	for _, p := range b.Optional {
		parts = append(parts, "["+string(p)+" "+metaVar(p)+"]")
	}
	return strings.Join(parts, " ")
}

func metaVar(p Param) string {
	switch p {
	case PNh4:
		return "IPV4"
	case PNh6:
		return "IPV6"
	case POif, PIif:
		return "DEV"
	case PTable:
		return "N|main"
	case PVRFTable:
		return "N"
	case PSegs:
		return "SID,..."
	case PHMAC:
		return "KEYID"
	case PFlavors:
		return "psp|usp|usd|next-csid"
	case PLBLen, PNFLen:
		return "BITS"
	case PEndpoint:
		return "PINNED_PATH"
	}
	return strings.ToUpper(string(p))
}

// HelpTable renders the behaviour table for --help and docs: one line per
// behaviour with its synopsis, then an example. extra lists behaviours of
// extensions (name → synopsis) appended after the native ones.
func HelpTable(extra map[string]string) string {
	var b strings.Builder
	for _, bh := range behaviors {
		fmt.Fprintf(&b, "  %s\n      %s", bh.Synopsis(), bh.Summary)
		if bh.NeedsVRF {
			b.WriteString(" (needs VRF)")
		}
		fmt.Fprintf(&b, "\n      e.g. segchain sid add %s\n", bh.Example)
	}
	names := make([]string, 0, len(extra))
	for n := range extra {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  %s\n", extra[n])
	}
	return b.String()
}
