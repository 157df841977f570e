package localsid

import "net/netip"

// Extension plugs behaviours the kernel lacks (the eBPF SR proxies End.AS,
// End.AD, End.AM ...) into `segchain sid`. The CLI hands every behaviour name
// an extension claims (case-insensitively) to it, and merges its entries into
// show, flush and clear-counters. netns "" is the current namespace.
type Extension interface {
	Behaviors() []string // canonical names it handles, e.g. "End.AS", "End.AD", "End.AM"
	Add(netns string, sid netip.Prefix, behavior string, params []string) error
	Del(netns string, sid netip.Prefix) (bool, error) // false = not ours
	Show(netns string) ([]Entry, error)
	Flush(netns string) error
	ClearCounters(netns string, sid *netip.Prefix) error
}

// Entry is one local SID as `sid show` reports it, native or from an
// extension. Counters use the keys "packets", "bytes" and "errors" where
// they apply; extensions may add more (e.g. per-reason drops).
type Entry struct {
	SID      netip.Prefix      `json:"sid"`
	Behavior string            `json:"behavior"`
	Params   map[string]string `json:"params,omitempty"`
	Counters map[string]uint64 `json:"counters,omitempty"`
	Extra    any               `json:"extra,omitempty"`
}

// NativeInfo is the Extra of an Entry describing a native seg6local route.
type NativeInfo struct {
	Dev      string `json:"dev"`
	Table    int    `json:"table,omitempty"`  // the table the SID route is in; 0 = main
	Protocol int    `json:"protocol"`         // rtnetlink protocol of the route
	Segchain bool   `json:"segchain"`         // installed by segchain: by apply (nodestate.Proto) or by hand (nodestate.ProtoManual)
	Origin   string `json:"origin,omitempty"` // "domain", "hand-made" or "" (nodestate.Origin)
}

// FindExtension returns the extension that handles behavior (compared
// case-insensitively) and its canonical spelling, or nil.
func FindExtension(exts []Extension, behavior string) (Extension, string) {
	for _, e := range exts {
		for _, b := range e.Behaviors() {
			if equalFold(b, behavior) {
				return e, b
			}
		}
	}
	return nil, ""
}
