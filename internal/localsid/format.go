package localsid

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/segchain/segchain/internal/dataplane"
	"github.com/segchain/segchain/internal/nodestate"
)

func equalFold(a, b string) bool { return strings.EqualFold(a, b) }

func joinSegs(l *nodestate.Seg6Local) string {
	s := make([]string, len(l.Segs))
	for i, a := range l.Segs {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

func tableName(n int) string {
	switch n {
	case 254:
		return "main"
	case 255:
		return "local"
	case 253:
		return "default"
	}
	return strconv.Itoa(n)
}

// Params returns the behaviour parameters of a seg6local route as keyword →
// value, in the spelling Parse accepts. Flags without a value (count) map to
// "". The route's device is not included.
func Params(l *nodestate.Seg6Local) map[string]string {
	m := map[string]string{}
	if l == nil {
		return m
	}
	if l.Nh4.IsValid() {
		m["nh4"] = l.Nh4.String()
	}
	if l.Nh6.IsValid() {
		m["nh6"] = l.Nh6.String()
	}
	if l.Oif != "" {
		m["oif"] = l.Oif
	}
	if l.Iif != "" {
		m["iif"] = l.Iif
	}
	if l.Table != 0 {
		m["table"] = tableName(l.Table)
	}
	if l.VRFTable != 0 {
		m["vrftable"] = strconv.Itoa(l.VRFTable)
	}
	if len(l.Segs) > 0 {
		m["segs"] = joinSegs(l)
	}
	if l.HMAC != 0 {
		m["hmac"] = strconv.FormatUint(uint64(l.HMAC), 10)
	}
	if len(l.Flavors) > 0 {
		m["flavors"] = strings.Join(l.Flavors, ",")
	}
	if l.LBLen != 0 || l.NFLen != 0 {
		m["lblen"], m["nflen"] = strconv.Itoa(l.LBLen), strconv.Itoa(l.NFLen)
	}
	if l.BPF != "" {
		m["endpoint"] = l.BPF
	}
	if l.Count {
		m["count"] = ""
	}
	return m
}

// paramOrder is the order parameters are printed in.
var paramOrder = []string{"nh4", "nh6", "table", "vrftable", "iif", "oif", "segs", "hmac", "flavors", "lblen", "nflen", "endpoint"}

// Args renders a seg6local route back into `sid add` arguments: Parse(Args(r))
// yields r again.
func Args(r nodestate.Route) []string {
	if r.Seg6Local == nil {
		return nil
	}
	args := []string{sidString(r), r.Seg6Local.Action}
	args = append(args, paramArgs(Params(r.Seg6Local))...)
	if !r.Seg6Local.Count {
		args = append(args, "nocount")
	}
	if r.Dev != "" && r.Dev != DefaultDev {
		args = append(args, "dev", r.Dev)
	}
	return args
}

// paramArgs renders a parameter map as keyword value pairs in a stable order
// (known keywords first, then any others sorted), count omitted.
func paramArgs(m map[string]string) []string {
	var out []string
	done := map[string]bool{"count": true}
	for _, k := range paramOrder {
		if v, ok := m[k]; ok {
			out = append(out, k, v)
			done[k] = true
		}
	}
	var rest []string
	for k := range m {
		if !done[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		out = append(out, k)
		if m[k] != "" {
			out = append(out, m[k])
		}
	}
	return out
}

// sidString prints a /128 SID as a bare address and anything else as a prefix.
func sidString(r nodestate.Route) string {
	if r.Dst.Bits() == 128 {
		return r.Dst.Addr().String()
	}
	return r.Dst.String()
}

// Format renders one native local SID for `sid show`:
//
//	fc00:2::100 End.X nh6 fc00:23::3 dev lo packets 3 bytes 312 errors 0
//
// c nil means the route has no counters (installed with nocount).
func Format(r nodestate.Route, c *dataplane.Counters) string {
	if r.Seg6Local == nil {
		return r.String()
	}
	parts := []string{sidString(r), r.Seg6Local.Action}
	parts = append(parts, paramArgs(Params(r.Seg6Local))...)
	if r.Dev != "" {
		parts = append(parts, "dev", r.Dev)
	}
	if c != nil {
		parts = append(parts, fmt.Sprintf("packets %d bytes %d errors %d", c.Packets, c.Bytes, c.Errors))
	}
	return strings.Join(parts, " ")
}

// FormatEntry renders an extension's entry in the same shape as Format.
func FormatEntry(e Entry) string {
	parts := []string{e.SID.String(), e.Behavior}
	if e.SID.Bits() == 128 {
		parts[0] = e.SID.Addr().String()
	}
	parts = append(parts, paramArgs(e.Params)...)
	var keys []string
	for k := range e.Counters {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return counterRank(keys[i]) < counterRank(keys[j]) || (counterRank(keys[i]) == counterRank(keys[j]) && keys[i] < keys[j])
	})
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, e.Counters[k]))
	}
	return strings.Join(parts, " ")
}

func counterRank(k string) int {
	switch k {
	case "packets":
		return 0
	case "bytes":
		return 1
	case "errors":
		return 2
	}
	return 3
}

// NativeEntry describes a native seg6local route as an Entry for `show -o json`.
func NativeEntry(r nodestate.Route, protocol int, c *dataplane.Counters) Entry {
	e := Entry{SID: r.Dst, Params: Params(r.Seg6Local),
		Extra: NativeInfo{Dev: r.Dev, Table: r.Table, Protocol: protocol, Segchain: nodestate.Origin(protocol) != "", Origin: nodestate.Origin(protocol)}}
	if r.Seg6Local != nil {
		e.Behavior = r.Seg6Local.Action
	}
	delete(e.Params, "count")
	if c != nil {
		e.Counters = map[string]uint64{"packets": c.Packets, "bytes": c.Bytes, "errors": c.Errors}
	}
	return e
}
