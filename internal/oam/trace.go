package oam

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/plan"
)

// Hop kinds, in the order a chain's probe meets them.
const (
	KindHeadend  = "headend"
	KindSID      = "sid"      // a segment: a native SID or a service's
	KindSF       = "sf"       // the SR-unaware function behind a proxy SID
	KindEgress   = "egress"   // the decapsulating last segment
	KindDelivery = "delivery" // the node the inner packet is delivered to
)

// Domain is what a trace needs to know of a lab: its domain, its plan and
// the namespace of every node.
type Domain struct {
	Config *config.Domain
	Plan   *plan.Plan
	Netns  map[string]string
	// Counters reads every node's per-SID counters (controller.Counters);
	// nil: the report has no per-SID counter deltas.
	Counters func(ctx context.Context) (map[string][]agent.SIDCounters, error)
	// Remote, if set, reaches the nodes that have an agent (Remote.Has):
	// their taps, the probe's injection at their headend, their IP
	// statistics. Netns then lists only the nodes without one (if any).
	Remote Remote
}

// Options tune a trace.
type Options struct {
	// Timeout is how long to wait for the probe's delivery (default 300 ms).
	Timeout time.Duration
	// Tap is TapTracepoint (default) or TapTCX.
	Tap string
}

// Hop is one function of the chain as the probe met it.
type Hop struct {
	Kind     string `json:"kind"`
	Node     string `json:"node"`
	SID      string `json:"sid,omitempty"`
	Behavior string `json:"behavior,omitempty"`
	Service  string `json:"service,omitempty"`
	// Reached: the probe was seen on the hop's node (for a SID: arriving
	// with the SID as its destination). Inferred: not seen there, but at a
	// later hop (a function served before tc, in XDP).
	Reached  bool `json:"reached"`
	Inferred bool `json:"inferred,omitempty"`
	// Left: the probe was seen leaving the hop (for a proxy: after the SF).
	Left bool   `json:"left"`
	In   string `json:"in,omitempty"`  // interface it arrived on
	Out  string `json:"out,omitempty"` // interface it left on
	// AtUS is the time from the probe's arrival at the headend to its
	// arrival here; HeldUS the time between its arrival and departure
	// (a proxy: to the SF and back), in microseconds.
	AtUS   *float64 `json:"at_us,omitempty"`
	HeldUS *float64 `json:"held_us,omitempty"`
	// SIDPackets is how much the SID's packet counter went up.
	SIDPackets *uint64  `json:"sid_packets,omitempty"`
	Via        []string `json:"via,omitempty"` // transit nodes crossed to get here
}

// Name is how a report names the hop.
func (h Hop) Name() string {
	switch h.Kind {
	case KindHeadend:
		return "headend " + h.Node
	case KindSF:
		return "SF " + h.Node + " (behind " + h.Service + ")"
	case KindDelivery:
		return "delivery to " + h.Node
	}
	return h.Service + " (" + h.SID + " " + h.Behavior + " on " + h.Node + ")"
}

// Delta is a counter that went up during the trace.
type Delta struct {
	Node    string `json:"node"`
	Counter string `json:"counter"` // "SID fc00:2::/112 nfv1-end errors", "Ip6OutNoRoutes"
	Delta   uint64 `json:"delta"`
}

// Broken names the hop the probe did not get through.
type Broken struct {
	Hop    int    `json:"hop"` // index in Report.Hops
	Name   string `json:"name"`
	Reason string `json:"reason"` // "not reached", "did not leave"
	// LastSeen is where the probe was seen last.
	LastSeen string  `json:"last_seen,omitempty"`
	Drops    []Delta `json:"drops,omitempty"` // drop counters that went up, on any node
	// KernelDrops: where the kernel dropped the probe, and why.
	KernelDrops []KernelDrop `json:"kernel_drops,omitempty"`
}

// KernelDrop is the kernel dropping the probe (skb:kfree_skb).
type KernelDrop struct {
	Node   string  `json:"node"`
	Iface  string  `json:"iface,omitempty"` // the skb's device then
	Reason string  `json:"reason"`          // enum skb_drop_reason without SKB_DROP_REASON_
	AtUS   float64 `json:"at_us"`
}

// Report is one trace.
type Report struct {
	Chain string `json:"chain"`
	Mode  string `json:"mode"`
	Probe string `json:"probe"`
	From  string `json:"from"` // node:iface the probe was sent from
	// Clock says whose clock the times are on: "kernel" (one kernel, every
	// node a namespace of it) or ClockAgents.
	Clock     string   `json:"clock"`
	Hops      []Hop    `json:"hops"`
	Path      []string `json:"path"` // every node:iface sighting in order
	Delivered bool     `json:"delivered"`
	Broken    *Broken  `json:"broken,omitempty"`
	// KernelDrops are the kernel's drops of the probe (tracepoint tap
	// only): after a delivery, the destination's own (no socket) are
	// normal.
	KernelDrops []KernelDrop `json:"kernel_drops,omitempty"`
	Counters    []Delta      `json:"counters,omitempty"`
	// TookMS is the whole trace: attach, probe, wait, detach; Phases
	// splits it.
	TookMS float64 `json:"took_ms"`
	Phases Phases  `json:"phases"`
}

// Phases are the parts of a trace's time, in milliseconds.
type Phases struct {
	AttachMS float64 `json:"attach_ms"` // load and attach the tap everywhere, counters read meanwhile
	ProbeMS  float64 `json:"probe_ms"`  // probe sent until delivered (or the timeout)
	DetachMS float64 `json:"detach_ms"` // detach, counters read again meanwhile
}

// Report.Clock values.
const (
	ClockKernel = "kernel"
	// ClockAgents: each node's wall clock (its agent's CLOCK_REALTIME
	// offset added to its kernel's timestamps): across machines as good
	// as their time synchronisation.
	ClockAgents = "agents (each node's CLOCK_REALTIME)"
)

// attachRemote taps the nodes with agents through them and the others
// (namespaces of this machine) here, on one wall-clock time line.
func attachRemote(ctx context.Context, d Domain, magic uint64, timeout time.Duration) (Tapper, error) {
	var remote []string
	for _, n := range sortedKeys(d.Config.Nodes) {
		if d.Remote.Has(n) {
			remote = append(remote, n)
		}
	}
	local := map[string]string{}
	for n, ns := range d.Netns {
		if !d.Remote.Has(n) {
			local[n] = ns
		}
	}
	// The agents' streams outlive the probe's wait by a margin.
	tl := NewTimeline()
	rt, err := d.Remote.Tap(ctx, remote, magic, timeout+5*time.Second, tl)
	if err != nil {
		return nil, err
	}
	taps := []Tapper{rt}
	if len(local) > 0 {
		lt, err := AttachRx(local, magic)
		if err != nil {
			rt.Close()
			return nil, err
		}
		taps = append(taps, wallTap{lt, tl.Local()})
	}
	return newMultiTap(taps...), nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Trace sends one probe along chain and reports every hop.
func Trace(ctx context.Context, d Domain, chain string, o Options) (*Report, error) {
	start := time.Now()
	if o.Timeout <= 0 {
		o.Timeout = 300 * time.Millisecond
	}
	pc, cc, err := findChain(d, chain)
	if err != nil {
		return nil, err
	}
	from, probe, err := chooseProbe(d, pc, cc)
	if err != nil {
		return nil, fmt.Errorf("chain %s: %w", chain, err)
	}
	hops, dstNode := expectedHops(d, pc, probe)
	if d.Remote != nil {
		// A node neither an agent nor a namespace here serves is not
		// watched: its hops are left out, the trace ends at the last
		// watched one.
		var kept []Hop
		for _, h := range hops {
			if _, local := d.Netns[h.Node]; local || d.Remote.Has(h.Node) {
				kept = append(kept, h)
			}
		}
		hops = kept
		if len(hops) > 0 {
			dstNode = hops[len(hops)-1].Node
		}
	}
	r := &Report{Chain: pc.Name, Mode: pc.Mode, Probe: probe.String(), From: from.Peer + ":" + from.PeerIface, Clock: ClockKernel}

	var mb [8]byte
	if _, err := rand.Read(mb[:]); err != nil {
		return nil, err
	}
	magic := binary.LittleEndian.Uint64(mb[:]) | 1 // never 0: the unset constant
	// The counters are read while the tap attaches (and again while it
	// detaches): both wait mostly on the kernel, one on RCU grace periods.
	t := time.Now()
	var before counters
	var berr error
	bdone := make(chan struct{})
	go func() { defer close(bdone); before, berr = snapshot(ctx, d) }()
	var tap Tapper
	switch {
	case d.Remote != nil:
		if o.Tap != "" && o.Tap != TapTracepoint {
			err = fmt.Errorf("tap %q: through agents, the tracepoint tap only", o.Tap)
			break
		}
		tap, err = attachRemote(ctx, d, magic, o.Timeout)
	case o.Tap == "" || o.Tap == TapTracepoint:
		tap, err = AttachRx(d.Netns, magic)
	case o.Tap == TapTCX:
		tap, err = Attach(d.Netns, magic)
	default:
		err = fmt.Errorf("tap %q: %s or %s", o.Tap, TapTracepoint, TapTCX)
	}
	<-bdone
	if err != nil {
		return nil, err
	}
	defer func() {
		if tap != nil {
			tap.Close()
		}
	}()
	if berr != nil {
		return nil, berr
	}
	r.Phases.AttachMS = ms(time.Since(t))
	t = time.Now()
	if d.Remote != nil && d.Remote.Has(from.Node) {
		// The headend's agent hands the probe to its stack as arriving
		// on the host link: no host needs to run anything.
		r.From = from.Node + ":" + from.Iface + " (injected by its agent)"
		r.Clock = ClockAgents
		frame, err := probe.frame(make(net.HardwareAddr, 6), make(net.HardwareAddr, 6), magic, 1)
		if err != nil {
			return nil, err
		}
		if err := d.Remote.Inject(ctx, from.Node, from.Iface, frame[14:]); err != nil {
			return nil, fmt.Errorf("inject the probe at %s: %w", from.Node, err)
		}
	} else {
		srcMAC, dstMAC, err := macs(d.Netns[from.Peer], from.PeerIface, d.Netns[from.Node], from.Iface)
		if err != nil {
			return nil, err
		}
		frame, err := probe.frame(srcMAC, dstMAC, magic, 1)
		if err != nil {
			return nil, err
		}
		t = time.Now()
		if err := inject(d.Netns[from.Peer], from.PeerIface, frame); err != nil {
			return nil, err
		}
	}
	evs, err := tap.Collect(time.Now().Add(o.Timeout), func(evs []Event) bool {
		return evs[len(evs)-1].Point.Node == dstNode
	})
	if err != nil {
		return nil, err
	}
	r.Phases.ProbeMS = ms(time.Since(t))
	t = time.Now()
	var after counters
	adone := make(chan struct{})
	go func() { defer close(adone); after, err = snapshot(ctx, d) }()
	derr := tap.Close()
	tap = nil
	<-adone
	if err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, fmt.Errorf("detach the tap: %w", derr)
	}
	r.Phases.DetachMS = ms(time.Since(t))
	r.Counters = diff(before, after)
	// The probe's own sighting on the host it was sent from is not a hop;
	// a drop is not an arrival.
	var seen []Event
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].At < evs[j].At })
	for _, e := range evs {
		switch {
		case e.Drop != "":
			var at float64
			if len(seen) > 0 {
				at = float64((e.At - seen[0].At).Nanoseconds()) / 1000
			}
			r.KernelDrops = append(r.KernelDrops, KernelDrop{Node: e.Point.Node, Iface: e.Point.Iface, Reason: e.Drop, AtUS: at})
		case e.Point.Node != from.Peer:
			seen = append(seen, e)
		}
	}
	for _, e := range seen {
		r.Path = append(r.Path, e.Point.String())
	}
	links := map[string]string{}
	for _, l := range d.Plan.Links {
		links[l.Node+":"+l.Iface] = l.Peer + ":" + l.PeerIface
	}
	match(hops, seen, links)
	sidPackets(hops, r.Counters)
	r.Hops = hops
	r.Delivered = len(hops) > 0 && hops[len(hops)-1].Reached
	r.Broken = broken(hops, seen, r.Counters)
	if r.Broken != nil {
		r.Broken.KernelDrops = r.KernelDrops
	}
	r.TookMS = ms(time.Since(start))
	return r, nil
}

func findChain(d Domain, name string) (*plan.Chain, *config.Chain, error) {
	var names []string
	for i := range d.Plan.Chains {
		c := &d.Plan.Chains[i]
		if c.Name == name {
			if cc, ok := d.Config.Chains[name]; ok {
				return c, cc, nil
			}
			// The reverse of a bidirectional chain classifies on the
			// forward match swapped, as the plan programs it (no iif).
			base, ok := strings.CutSuffix(name, "/reverse")
			if cc, found := d.Config.Chains[base]; ok && found {
				m := cc.Match
				rc := *cc
				rc.Match = config.Match{Family: m.Family, Src: m.Dst, Dst: m.Src, Proto: m.Proto, Sport: m.Dport, Dport: m.Sport}
				return c, &rc, nil
			}
			return nil, nil, fmt.Errorf("chain %s: not in the domain file", name)
		}
		names = append(names, c.Name)
	}
	return nil, nil, fmt.Errorf("no chain %q in domain %s (chains: %v)", name, d.Plan.Domain, names)
}

// chooseProbe picks the link the probe enters the headend by (from a host
// attached to it: the chain's iif if its match names one, else a host whose
// address is in the match's src) and the probe's flow.
func chooseProbe(d Domain, pc *plan.Chain, cc *config.Chain) (plan.Link, Probe, error) {
	var dstPref []netip.Addr
	for _, l := range d.Plan.Links {
		if n := d.Config.Nodes[l.Node]; n != nil && n.Role == config.RoleHost {
			for _, a := range l.Addrs {
				dstPref = append(dstPref, a.Addr())
			}
		}
	}
	// The first host that owns an address in the match's src, else the
	// first host whose link a probe can be built for.
	var first *plan.Link
	var firstProbe Probe
	var lastErr error
	for _, l := range d.Plan.Links {
		if l.Node != pc.Ingress || d.Config.Nodes[l.Peer] == nil || d.Config.Nodes[l.Peer].Role != config.RoleHost {
			continue
		}
		if cc.Match.Iif != "" && l.Iface != cc.Match.Iif {
			continue
		}
		var peerAddrs []netip.Addr
		for _, pl := range d.Plan.Links {
			if pl.Node == l.Peer && pl.Iface == l.PeerIface {
				for _, a := range pl.Addrs {
					peerAddrs = append(peerAddrs, a.Addr())
				}
			}
		}
		p, err := probeFor(cc.Match, peerAddrs, dstPref)
		if err != nil {
			lastErr = err
			continue
		}
		if cc.Match.Src == "" || containsAny(cc.Match.Src, peerAddrs) {
			return l, p, nil
		}
		if first == nil {
			l := l
			first, firstProbe = &l, p
		}
	}
	if first != nil {
		return *first, firstProbe, nil
	}
	if lastErr != nil {
		return plan.Link{}, Probe{}, lastErr
	}
	return plan.Link{}, Probe{}, fmt.Errorf("headend %s has no link to a host to send the probe from (trace injects it there, as the host would send it)", pc.Ingress)
}

func containsAny(prefix string, addrs []netip.Addr) bool {
	p, err := netip.ParsePrefix(prefix)
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// expectedHops lists the hops a probe of pc should meet, and the node its
// delivery is expected on ("" if the destination is no lab node's).
func expectedHops(d Domain, pc *plan.Chain, p Probe) ([]Hop, string) {
	hops := []Hop{{Kind: KindHeadend, Node: pc.Ingress, Behavior: headendBehavior(pc.Mode)}}
	for i, h := range pc.Hops {
		k := KindSID
		if i == len(pc.Hops)-1 && pc.Mode != config.ModeInsert {
			k = KindEgress
		}
		hops = append(hops, Hop{Kind: k, Node: h.Node, SID: h.SID.String(), Behavior: h.Behavior, Service: h.Service})
		s := d.Config.Services[h.Service]
		if s == nil || !s.SRUnaware() {
			continue
		}
		for _, l := range d.Plan.Links {
			if l.Node == s.Node && l.Iface == s.IfaceOut {
				hops = append(hops, Hop{Kind: KindSF, Node: l.Peer, Service: h.Service})
				break
			}
		}
	}
	dst := ""
	for _, l := range d.Plan.Links {
		for _, a := range l.Addrs {
			if a.Addr() == p.Dst {
				dst = l.Node
			}
		}
	}
	if dst != "" {
		hops = append(hops, Hop{Kind: KindDelivery, Node: dst})
	}
	return hops, dst
}

func headendBehavior(mode string) string {
	switch mode {
	case config.ModeInsert:
		return "H.Insert"
	case config.ModeEncapRed:
		return "H.Encaps.Red"
	case config.ModeL2Encap:
		return "H.Encaps.L2"
	case config.ModeL2EncapRed:
		return "H.Encaps.L2.Red"
	}
	return "H.Encaps"
}

// visit is the probe's stay on one node: consecutive sightings there.
type visit struct {
	node          string
	in, out       string
	arrive, leave time.Duration
	arrived, left bool
	da            net.IP
}

// visits groups the probe's arrivals by node. The tap sees arrivals
// only: a visit left when the probe arrived somewhere next, then, on the
// interface whose peer (links: node:iface → the other end) it arrived on.
func visits(evs []Event, links map[string]string) []visit {
	var vs []visit
	for _, e := range evs {
		if len(vs) > 0 && vs[len(vs)-1].node == e.Point.Node {
			continue // a second arrival on the same node (its own loop device)
		}
		vs = append(vs, visit{node: e.Point.Node, in: e.Point.Iface, arrive: e.At, arrived: true, da: e.DA})
	}
	for k := 0; k+1 < len(vs); k++ {
		vs[k].left, vs[k].leave = true, vs[k+1].arrive
		if peer, ok := links[vs[k+1].node+":"+vs[k+1].in]; ok {
			if n, ifn, _ := strings.Cut(peer, ":"); n == vs[k].node {
				vs[k].out = ifn
			}
		}
	}
	return vs
}

// match assigns the probe's visits to the expected hops in order: a SID
// hop takes the next visit to its node that arrived with the SID as its
// destination; a proxy's SF the next visit to the SF's node, and the visit
// back to the proxy's node right after it is the proxy's return; visits
// matched by no hop are transit (Via of the next hop matched).
func match(hops []Hop, evs []Event, links map[string]string) {
	vs := visits(evs, links)
	if len(vs) == 0 {
		return
	}
	t0 := vs[0].arrive
	us := func(d time.Duration) *float64 { f := float64(d.Nanoseconds()) / 1000; return &f }
	cur, last := 0, -1
	var via []string
	for i := range hops {
		h := &hops[i]
		found := -1
		for j := cur; j < len(vs); j++ {
			if vs[j].node != h.Node {
				continue
			}
			if h.SID != "" && vs[j].arrived && vs[j].da.String() != h.SID {
				continue
			}
			found = j
			break
		}
		if found < 0 {
			continue
		}
		for j := cur; j < found; j++ {
			via = append(via, vs[j].node)
		}
		v := vs[found]
		h.Reached, h.In, h.AtUS, h.Via = true, v.in, us(v.arrive-t0), via
		via = nil
		cur = found + 1
		proxy := i+1 < len(hops) && hops[i+1].Kind == KindSF
		if !proxy {
			h.Left, h.Out = v.left, v.out
			if v.left {
				h.HeldUS = us(v.leave - v.arrive)
			}
		}
		if h.Kind == KindSF && i > 0 && cur < len(vs) && vs[cur].node == hops[i-1].Node {
			// Back on the proxy's node: the proxy's departure.
			p, r := &hops[i-1], vs[cur]
			p.Left, p.Out = r.left, r.out
			if r.left && p.AtUS != nil {
				p.HeldUS = us(r.leave - t0 - time.Duration(*p.AtUS*1000))
			}
			cur++
		}
		for k := last + 1; k < i; k++ {
			hops[k].Inferred = true
		}
		last = i
	}
}

func sidPackets(hops []Hop, deltas []Delta) {
	for i := range hops {
		if hops[i].SID == "" {
			continue
		}
		for _, d := range deltas {
			if d.Node == hops[i].Node && d.Counter == "SID "+hops[i].SID+" packets" {
				v := d.Delta
				hops[i].SIDPackets = &v
			}
		}
	}
}

// broken finds the first hop the probe did not get through: not reached,
// or reached but not seen leaving while the next hop was not reached
// either. A proxy is at fault only when its SF returned the probe.
func broken(hops []Hop, evs []Event, deltas []Delta) *Broken {
	for i, h := range hops {
		var reason string
		next := i + 1
		if next < len(hops) && hops[next].Kind == KindSF {
			next++
		}
		switch {
		case !h.Reached && !h.Inferred:
			reason = "not reached"
		case h.Kind == KindDelivery || h.Left || next >= len(hops) || hops[next].Reached || hops[next].Inferred:
			continue
		case next == i+2 && !hops[i+1].Left:
			continue // the SF's fault, named next
		case next == i+2:
			reason = "did not leave (its SF returned the probe)"
		default:
			reason = "did not leave"
		}
		b := &Broken{Hop: i, Name: h.Name(), Reason: reason}
		if len(evs) > 0 {
			b.LastSeen = evs[len(evs)-1].Point.String()
		}
		for _, d := range deltas {
			if isDrop(d.Counter) {
				b.Drops = append(b.Drops, d)
			}
		}
		return b
	}
	return nil
}
