package netfilter

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/segchain/segchain/internal/localsid"
)

// Behavior is End.AN.NF's name in `segchain sid`.
const Behavior = "End.AN.NF"

// Extension plugs End.AN.NF into `segchain sid` (localsid.Extension):
//
//	sid add SID/LEN End.AN.NF [args BITS]
type Extension struct{}

var _ localsid.Extension = Extension{}

// Behaviors implements localsid.Extension.
func (Extension) Behaviors() []string { return []string{Behavior} }

// ParseParams reads `args BITS`.
func ParseParams(sid netip.Prefix, params []string) (Instance, error) {
	in := Instance{SID: sid.Masked()}
	for i := 0; i < len(params); i += 2 {
		k := strings.ToLower(params[i])
		if k != "args" {
			return in, fmt.Errorf("%s: unknown parameter %q (want args BITS)", Behavior, params[i])
		}
		if i+1 >= len(params) {
			return in, fmt.Errorf("%s: args needs a number of bits", Behavior)
		}
		n, err := strconv.Atoi(params[i+1])
		if err != nil {
			return in, fmt.Errorf("%s: args %q: want a number of bits", Behavior, params[i+1])
		}
		in.ArgsBits = n
	}
	return in, in.Validate()
}

// Add implements localsid.Extension.
func (Extension) Add(netns string, sid netip.Prefix, behavior string, params []string) error {
	in, err := ParseParams(sid, params)
	if err != nil {
		return err
	}
	sts, err := List(netns)
	if err != nil {
		return err
	}
	for _, s := range sts {
		if s.SID == in.SID {
			return fmt.Errorf("%s: SID exists (%s): delete it first", in.SID, Behavior)
		}
	}
	return Apply(netns, in)
}

// Del implements localsid.Extension.
func (Extension) Del(netns string, sid netip.Prefix) (bool, error) { return Remove(netns, sid) }

// Show implements localsid.Extension: counters packets, bytes, errors
// (malformed drops), to-netfilter, accepted, to-stack, dropped-netfilter,
// dropped-malformed and drop-<reason>; the Extra is the Status.
func (Extension) Show(netns string) ([]localsid.Entry, error) {
	sts, err := List(netns)
	if err != nil {
		return nil, err
	}
	var out []localsid.Entry
	for _, st := range sts {
		out = append(out, EntryOf(st))
	}
	// Drops of packets without a SID (no tag, a reused slot), when any:
	// one row for the loop, as the boundary filter's rows.
	ls, err := Loop(netns)
	if err != nil {
		return nil, err
	}
	if len(ls.Drops) > 0 {
		e := localsid.Entry{SID: netip.PrefixFrom(netip.IPv6Unspecified(), 0), Behavior: Behavior + "-loop",
			Params: map[string]string{"dev": LoopOut}, Counters: map[string]uint64{}}
		for r, v := range ls.Drops {
			e.Counters["drop-"+r] = v
		}
		out = append(out, e)
	}
	return out, nil
}

// EntryOf converts a Status to a `sid show` entry.
func EntryOf(st Status) localsid.Entry {
	params := map[string]string{}
	if st.ArgsBits > 0 {
		params["args"] = strconv.Itoa(st.ArgsBits)
	}
	c := st.Counters
	counters := map[string]uint64{
		"packets": c.Packets, "bytes": c.Bytes, "errors": c.Malformed,
		"to-netfilter": c.ToNetfilter, "accepted": c.Accepted, "to-stack": c.ToStack,
		"dropped-netfilter": c.DroppedNetfilter, "dropped-malformed": c.Malformed,
	}
	for r, v := range c.Drops {
		counters["drop-"+r] = v
	}
	return localsid.Entry{SID: st.SID, Behavior: Behavior, Params: params, Counters: counters, Extra: st}
}

// Flush implements localsid.Extension.
func (Extension) Flush(netns string) error { return Flush(netns) }

// ClearCounters implements localsid.Extension.
func (Extension) ClearCounters(netns string, sid *netip.Prefix) error {
	return ClearCounters(netns, sid)
}
