package firewall

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/segchain/segchain/internal/fwrule"
	"github.com/segchain/segchain/internal/localsid"
)

// Behavior is the firewall's behaviour name in `segchain sid`.
const Behavior = "End.AN.FW"

// Extension plugs the firewall into `segchain sid` (localsid.Extension):
//
//	sid add SID/LEN End.AN.FW [args BITS] [policy accept|drop]
//
// creates an instance with no rules; `segchain fw` manages its rules.
type Extension struct{}

var _ localsid.Extension = Extension{}

// Behaviors implements localsid.Extension.
func (Extension) Behaviors() []string { return []string{Behavior} }

// ParseParams reads `args BITS` and `policy accept|drop`.
func ParseParams(sid netip.Prefix, params []string) (Instance, error) {
	in := Instance{SID: sid.Masked(), Policy: fwrule.Accept}
	for i := 0; i < len(params); i++ {
		k := strings.ToLower(params[i])
		if i+1 >= len(params) {
			return in, fmt.Errorf("%s: %s needs a value", Behavior, k)
		}
		v := params[i+1]
		i++
		switch k {
		case "args":
			n, err := strconv.Atoi(v)
			if err != nil {
				return in, fmt.Errorf("%s: args %q: want a number of bits", Behavior, v)
			}
			in.ArgsBits = n
		case "policy":
			p, err := fwrule.ParseTargetKind(v)
			if err != nil || (p != fwrule.Accept && p != fwrule.Drop) {
				return in, fmt.Errorf("%s: policy %q: want accept or drop", Behavior, v)
			}
			in.Policy = p
		default:
			return in, fmt.Errorf("%s: unknown parameter %q (want args BITS, policy accept|drop)", Behavior, params[i-1])
		}
	}
	return in, in.Validate()
}

// Add implements localsid.Extension.
func (Extension) Add(netns string, sid netip.Prefix, behavior string, params []string) error {
	in, err := ParseParams(sid, params)
	if err != nil {
		return err
	}
	if _, ok, err := Get(netns, in.SID); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("%s: SID exists (%s): delete it first, or change its rules with segchain fw", in.SID, Behavior)
	}
	return Apply(netns, in)
}

// Del implements localsid.Extension.
func (Extension) Del(netns string, sid netip.Prefix) (bool, error) { return Remove(netns, sid) }

// Show implements localsid.Extension: counters "packets", "bytes",
// "errors" (drops for malformed input), the actions taken and
// "drop-<reason>"; the Extra is the full Status.
func (Extension) Show(netns string) ([]localsid.Entry, error) {
	sts, err := List(netns)
	if err != nil {
		return nil, err
	}
	var out []localsid.Entry
	for _, st := range sts {
		out = append(out, EntryOf(st))
	}
	return out, nil
}

// EntryOf converts a Status to a `sid show` entry.
func EntryOf(st Status) localsid.Entry {
	in := st.Instance
	params := map[string]string{"policy": in.Policy.String(), "rules": strconv.Itoa(len(st.Rules))}
	if in.ArgsBits > 0 {
		params["args"] = strconv.Itoa(in.ArgsBits)
	}
	c := st.Counters
	counters := map[string]uint64{
		"packets": c.Packets, "bytes": c.Bytes, "forwarded": c.Forwarded, "delivered": c.Delivered,
		"go-next": c.GoNext, "skip-next": c.SkipNext, "go-last": c.GoLast, "policy": c.Policy,
		"icmp-sent": c.ICMPSent, "icmp-limited": c.ICMPLimited,
	}
	var errs uint64
	for r, v := range c.Drops {
		counters["drop-"+r] = v
		if !verdictDrop[r] {
			errs += v
		}
	}
	counters["errors"] = errs
	return localsid.Entry{SID: in.SID, Behavior: Behavior, Params: params, Counters: counters, Extra: st}
}

// verdictDrop are drops the rules asked for (not errors).
var verdictDrop = map[string]bool{DropRule.String(): true, DropReject.String(): true, DropPolicy.String(): true}

// Flush implements localsid.Extension.
func (Extension) Flush(netns string) error { return Flush(netns) }

// ClearCounters implements localsid.Extension.
func (Extension) ClearCounters(netns string, sid *netip.Prefix) error {
	return ClearCounters(netns, sid)
}
