package plan

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/csid"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/service"
)

// Compressed SIDs (sid.format: f3216, docs/usid.md). Every compressible
// entry of the SID table (config.USIDReason) gets a uSID instead of a full
// SID: b.sids holds its address block:uSID::, so the rest of the builder
// (routes, hops, SID list) uses it unchanged; what differs is here: the
// /48 prefix of such a SID, the next-csid flavor on End/End.X, each SR
// node's uN and /40 route, and the packing of a chain into containers.

// usids replaces the SID of every compressible entry with its uSID.
func (b *builder) usids() error {
	if !b.d.Compressed() {
		return nil
	}
	u, err := b.d.USIDs()
	if err != nil {
		return fmt.Errorf("allocate uSIDs: %w", err)
	}
	for k, a := range u {
		b.sids[k] = a
	}
	b.csid = b.d.USIDFormat()
	return nil
}

// isUSID reports whether a is a uSID of the domain (block:uSID::).
func (b *builder) isUSID(a netip.Addr) bool {
	if !b.d.Compressed() {
		return false
	}
	_, ok := b.csid.Value(a)
	return ok
}

// usidPrefix is the route of a uSID: block:uSID::/(LBL+16), which matches the
// uSID whatever follows it in the container.
func (b *builder) usidPrefix(a netip.Addr) (netip.Prefix, bool) {
	v, ok := b.csid.Value(a)
	if !ok || !b.d.Compressed() {
		return netip.Prefix{}, false
	}
	return b.csid.Prefix(v), true
}

// usidFlavors adds next-csid to End and End.X at a uSID (usidLengths
// sets the format's lengths).
func (b *builder) usidFlavors(behavior string, a netip.Addr, fl []string) []string {
	if !b.isUSID(a) || (behavior != "End" && behavior != "End.X") || slices.Contains(fl, "next-csid") {
		return fl
	}
	return append(append([]string(nil), fl...), "next-csid")
}

// usidLengths sets the domain format's NEXT-C-SID lengths (lblen: the
// block's, nflen: a uSID's) on a next-csid route of uSID a: sent on every
// such route, F3216's too, though the kernel's defaults are F3216's, so
// that the route says its format and one with other lengths is drift.
func (b *builder) usidLengths(l *nodestate.Seg6Local, a netip.Addr) {
	if !b.isUSID(a) || !slices.Contains(l.Flavors, "next-csid") {
		return
	}
	l.LBLen, l.NFLen = b.csid.Block.Bits(), b.csid.NFLen
}

// usidNodes installs every SR node's uN (End next-csid at block:ID00::/(LBL+16))
// and records it in the SID table.
func (b *builder) usidNodes() {
	if !b.d.Compressed() {
		return
	}
	for _, n := range b.d.NodeNames() {
		loc := b.d.USIDLocator(n)
		if !loc.IsValid() || !b.isSR(n) {
			continue
		}
		un := b.csid.SID(b.d.USIDNode(n))
		b.addRoute(n, nodestate.Route{Dst: b.csid.Prefix(b.d.USIDNode(n)),
			Seg6Local: &nodestate.Seg6Local{Action: "End", Flavors: []string{"next-csid"},
				LBLen: b.csid.Block.Bits(), NFLen: b.csid.NFLen, Count: true}, Owner: "uN " + n})
		b.addSID(n, "uN", "End", un)
	}
}

// usidDests are the /(LBL+8) uSID locators the static routes lead to.
func (b *builder) usidDests() map[string]netip.Prefix {
	out := map[string]netip.Prefix{}
	if !b.d.Compressed() {
		return out
	}
	for _, n := range b.d.NodeNames() {
		if loc := b.d.USIDLocator(n); loc.IsValid() && b.isSR(n) {
			out[n] = loc
		}
	}
	return out
}

// pack compiles a chain's SID list (hops in path order, segs their SIDs)
// into SRH entries: uSIDs share containers, full SIDs stand alone. The
// last hop is the egress when the chain has one: a decapsulating uSID
// closes its container.
func (b *builder) pack(hops []Hop, segs []netip.Addr) []netip.Addr {
	if !b.d.Compressed() {
		return segs
	}
	ch := make([]csid.Hop, len(segs))
	for i, a := range segs {
		if v, ok := b.csid.Value(a); ok {
			ch[i] = csid.Hop{USID: true, Value: v, Last: i < len(hops) && !b.hopShifts(hops[i])}
		} else {
			ch[i] = csid.Hop{Full: a}
		}
	}
	return b.csid.Pack(ch)
}

func shifts(behavior string) bool { return behavior == "End" || behavior == "End.X" }

// hopShifts reports whether a uSID hop goes on with the next uSID of its
// container: native End/End.X (the kernel's next-csid) and the services of
// kinds that took a uSID (they understand containers). An egress
// decapsulates: its uSID ends the container.
func (b *builder) hopShifts(h Hop) bool {
	s := b.d.Services[h.Service]
	if s == nil {
		return false
	}
	if s.Served() {
		// A kind whose uSID must end its container (End.AM).
		if c, ok := s.ServiceKind().(interface{ CSIDCloses(any) bool }); ok && c.CSIDCloses(s.KindBlock()) {
			return false
		}
		return true
	}
	return shifts(s.Behavior)
}

// encapMode is the kernel mode of a chain's encapsulation: a chain that is
// all uSIDs uses the reduced form (H.Encaps.Red: the first container only
// in the DA, no SRH at all when it is the only one). A mixed chain keeps
// the full SRH: segchain's eBPF services read Segment List[SL], which the
// reduced SRH leaves out. HMAC needs the SRH. So do the SR proxies and
// End.AN.NF (kinds with CSIDNeedsFullSRH) when the chain needs an SRH at
// all (more than one container): their SRH walk refuses the reduced SRH's
// Segments Left = Last Entry + 1.
func (b *builder) encapMode(mode string, hops []Hop, containers int, hmac bool) string {
	if !b.d.Compressed() || hmac || (mode != "encap" && mode != "l2encap") {
		return mode
	}
	for _, h := range hops {
		if !b.isUSID(h.SID) {
			return mode
		}
		if s := b.d.Services[h.Service]; containers > 1 && s != nil && s.Served() {
			if k, ok := s.ServiceKind().(interface{ CSIDNeedsFullSRH() bool }); ok && k.CSIDNeedsFullSRH() {
				return mode
			}
		}
	}
	return mode + ".red"
}

// usidNotes says, in a compressed domain, which hops keep a full SID and why.
func (b *builder) usidNotes(name string, hops []Hop) {
	if !b.d.Compressed() {
		return
	}
	for _, h := range hops {
		if b.isUSID(h.SID) {
			continue
		}
		key := h.Service
		if _, ok := b.d.Services[key]; !ok {
			key = config.EgressKey(name)
		}
		b.p.Notes = append(b.p.Notes, fmt.Sprintf("chains.%s: %s keeps a full SID: %s", name, h.Service, b.d.USIDReason(key)))
	}
}

// usidInput tells a service kind its SID is a uSID: no ARGS, the C-SID
// lengths its data path shifts with.
func (b *builder) usidInput(in *service.Input) {
	if !b.isUSID(in.SID) {
		return
	}
	in.ArgsBits = 0
	in.CSIDLBLen, in.CSIDNFLen = b.csid.Block.Bits(), b.csid.NFLen
}
