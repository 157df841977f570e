// Package boundaryperf measures what the SR domain boundary filter costs
// ordinary traffic at an ingress, with segchain perf's testbed and its
// sandwich method. The filter sits on an interface, so within one
// generator run it cannot be on for one arm's frames and off for the
// reference's (this kernel has no VLAN or macvlan devices to give each arm
// an interface of its own). Instead, the arm's generator slot switch also
// attaches the filter to the SUT's input port and the reference's detaches
// it: REF (IPv6, no filter), X (with the filter), REF, ... every window
// after the usual settle time.
package boundaryperf

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/boundary"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/perf"
)

// Filter is the boundary measured: 8 locators, an external SID and 32
// node addresses, none of which the test packets hit (ordinary traffic).
func Filter() nodestate.Boundary {
	b := nodestate.Boundary{External: []netip.Prefix{netip.MustParsePrefix("fd5e:1:0:0:f1::/80")}}
	for i := 1; i <= 8; i++ {
		b.Locators = append(b.Locators, netip.MustParsePrefix(fmt.Sprintf("fd5e:%x::/48", i)))
	}
	for i := 1; i <= 32; i++ {
		b.Nodes = append(b.Nodes, netip.MustParseAddr(fmt.Sprintf("fd5f:%x::1", i)))
	}
	return b
}

// Modes of the SUT's input port during an arm.
const (
	modeNone        = iota // nothing attached (the reference)
	modeFilter             // the boundary filter in TCX, ingress and egress
	modeEmpty              // an empty TCX ingress program: the hook's own cost
	modeEmptyFilter        // the empty TCX program and the filter: the filter's cost where a TCX program already runs
	modeEmptyXDP           // an empty native XDP program (XDP_PASS)
	modeXDPFilter          // the filter's XDP ingress program and its TCX egress program
	modeEmptyCls           // the empty program as a tc clsact filter in direct-action mode (cls_bpf)
	modeBaseline           // the filter's TCX programs from another object (a previous build), same tables
)

// portState is what is attached to the SUT's input port now.
type portState struct {
	mode     int
	empty    *ebpf.Program
	emptyXDP *ebpf.Program
	baseline string // the object modeBaseline attaches
	links    []link.Link
}

func (s *portState) set(env *perf.Env, mode int) error {
	if s.mode == mode {
		return nil
	}
	for _, l := range s.links {
		if err := l.Close(); err != nil {
			return err
		}
	}
	s.links = nil
	if s.mode == modeEmptyCls {
		if err := env.Do(func() error { return clsact(env.In, nil) }); err != nil {
			return fmt.Errorf("remove clsact: %w", err)
		}
	}
	// Apply installs the tables either way; modeBaseline attaches its own
	// programs over them.
	if err := SetFilter(env, mode == modeFilter || mode == modeEmptyFilter); err != nil {
		return err
	}
	err := env.Do(func() error {
		i, err := net.InterfaceByName(env.In)
		if err != nil {
			return err
		}
		var l link.Link
		switch mode {
		case modeEmpty, modeEmptyFilter:
			l, err = link.AttachTCX(link.TCXOptions{Interface: i.Index, Program: s.empty, Attach: ebpf.AttachTCXIngress, Anchor: link.Tail()})
		case modeEmptyXDP:
			l, err = link.AttachXDP(link.XDPOptions{Interface: i.Index, Program: s.emptyXDP, Flags: link.XDPDriverMode})
		case modeXDPFilter:
			s.links, err = boundary.AttachXDP(i.Index)
		case modeEmptyCls:
			err = clsact(env.In, s.empty)
		case modeBaseline:
			s.links, err = boundary.AttachTCXFrom(i.Index, s.baseline)
		}
		if l != nil {
			s.links = append(s.links, l)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("attach to %s: %w", env.In, err)
	}
	s.mode = mode
	return nil
}

// clsact adds a clsact qdisc to dev with prog as a direct-action ingress
// filter, or (prog nil) deletes the qdisc.
func clsact(dev string, prog *ebpf.Program) error {
	l, err := netlink.LinkByName(dev)
	if err != nil {
		return err
	}
	q := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index,
		Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}, QdiscType: "clsact"}
	if prog == nil {
		return netlink.QdiscDel(q)
	}
	if err := netlink.QdiscAdd(q); err != nil {
		return err
	}
	err = netlink.FilterAdd(&netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: l.Attrs().Index,
		Parent: netlink.HANDLE_MIN_INGRESS, Handle: 1, Protocol: unix.ETH_P_ALL, Priority: 1},
		Fd: prog.FD(), Name: "segchain-perf-empty", DirectAction: true})
	if err != nil {
		_ = netlink.QdiscDel(q)
	}
	return err
}

// emptyXDP returns XDP_PASS at once (the TCX one: perf.EmptyTC).
func emptyXDP() (*ebpf.Program, error) {
	return ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}})
}

// SetFilter attaches (on) or detaches Filter on env.In only, as apply
// attaches it to a boundary interface: every other interface is trusted,
// and with off, env.In too.
func SetFilter(env *perf.Env, on bool) error {
	return env.Do(func() error {
		ifs, err := net.Interfaces()
		if err != nil {
			return err
		}
		b := Filter()
		for _, i := range ifs {
			if i.Flags&net.FlagLoopback == 0 && (i.Name != env.In || !on) {
				b.Trusted = append(b.Trusted, i.Name)
			}
		}
		return boundary.Apply("", b)
	})
}

// Arm is one measured traffic type: its ratio to the reference (IPv6
// without the filter) by SUT CPU ns/packet and by throughput, and its
// latency at a paced rate (absolute and added to the reference's).
type Arm struct {
	Name       string
	CPURatio   perf.Summary
	Throughput perf.Summary
	NsPerPkt   perf.Summary
	Latency    *perf.LatencyResult `json:",omitempty"`
}

// Result is a run: the reference's ns/packet and latency, and every arm.
type Result struct {
	RefNsPerPkt perf.Summary
	RefLatency  *perf.LatencyResult `json:",omitempty"`
	Arms        []Arm
}

// latencyRate is the paced rate of the latency phase (perf's default).
const latencyRate = 20000

// Measure runs the sandwich on an up testbed d (PrepareSUT done): rounds
// of IPv6 (reference, no filter), IPv6 with the filter, IPv6 with an empty
// TCX program (what the hook alone costs), T.Encaps without and with the
// filter, 64-byte packets.
func Measure(d perf.Driver, rounds int, window time.Duration) (*Result, error) {
	return MeasureBaseline(d, rounds, window, "")
}

// MeasureBaseline is Measure with one more arm when baseline names an
// object file of the filter (e.g. a previous commit's
// boundarytc_bpfel.o): IPv6 with that object's TCX programs on the same
// tables, so that a change's cost is measured in one run against the
// build before it.
func MeasureBaseline(d perf.Driver, rounds int, window time.Duration, baseline string) (*Result, error) {
	env := d.Env()
	if env.Do == nil {
		return nil, fmt.Errorf("the boundary filter needs the SUT's namespace: %w", perf.ErrNotSupported)
	}
	recipes := map[string]perf.Recipe{}
	for _, r := range perf.NativeRecipes() {
		recipes[r.Name()] = r
	}
	p := perf.Params{Size: 64}
	slots := []struct {
		name, recipe string
		mode         int
	}{
		{"IPv6", "IPv6", modeNone},
		{"IPv6 (A/A)", "IPv6", modeNone},
		{"IPv6+boundary", "IPv6", modeFilter},
		{"IPv6+empty-tcx", "IPv6", modeEmpty},
		{"IPv6+empty-tcx+boundary", "IPv6", modeEmptyFilter},
		{"IPv6+empty-cls", "IPv6", modeEmptyCls},
		{"IPv6+empty-xdp", "IPv6", modeEmptyXDP},
		{"IPv6+boundary-xdp", "IPv6", modeXDPFilter},
		{"T.Encaps", "T.Encaps", modeNone},
		{"T.Encaps+boundary", "T.Encaps", modeFilter},
		{"T.Encaps+boundary-xdp", "T.Encaps", modeXDPFilter},
	}
	if baseline != "" {
		slots = append(slots, struct {
			name, recipe string
			mode         int
		}{"IPv6+boundary-baseline", "IPv6", modeBaseline})
	}
	gen := d.Generator()
	mode := map[int]int{}
	var arms []perf.Arm
	for i, s := range slots {
		r, ok := recipes[s.recipe]
		if !ok {
			return nil, fmt.Errorf("no native recipe %s", s.recipe)
		}
		f, err := r.Setup(env, i, p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		if err := gen.Load(i, f); err != nil {
			return nil, err
		}
		mode[i] = s.mode
		if i > 0 {
			arms = append(arms, perf.Arm{Name: s.name, Slot: i})
		}
	}
	empty, err := perf.EmptyTC()
	if err != nil {
		return nil, err
	}
	defer empty.Close()
	exdp, err := emptyXDP()
	if err != nil {
		return nil, err
	}
	defer exdp.Close()
	state := &portState{mode: -1, empty: empty, emptyXDP: exdp, baseline: baseline}
	defer func() {
		_ = state.set(env, modeNone)
		_ = env.Do(func() error { return boundary.Remove("") })
	}()
	if err := state.set(env, modeNone); err != nil {
		return nil, err
	}
	// The generator's switch to a slot sets the port to the slot's mode
	// (perf.SwitchingGenerator).
	td := perf.WithGenerator(d, perf.SwitchingGenerator{Generator: gen,
		Before: func(slot int) error { return state.set(env, mode[slot]) }})
	ref, res, err := perf.Sandwich(td, perf.Arm{Name: "IPv6", Slot: 0}, arms, perf.SandwichConfig{
		Rounds: rounds, Settle: 50 * time.Millisecond, Window: window, MinOverload: 1.1, MaxLost: 0.05, Seed: 13})
	if err != nil {
		return nil, err
	}
	out := &Result{RefNsPerPkt: perf.Summarize(ref.NsPerPacket)}
	for _, a := range res {
		out.Arms = append(out.Arms, Arm{Name: a.Name, CPURatio: perf.Summarize(a.CPURatio),
			Throughput: perf.Summarize(a.Ratio), NsPerPkt: perf.Summarize(a.NsPerPacket)})
	}
	// Latency: every arm at one paced rate, its programs attached by the
	// same template switch (perf.MeasureLatency; docs/benchmarks.md).
	if ltd, ok := td.(perf.LatencyDriver); ok {
		lref, lres, err := perf.MeasureLatency(ltd, perf.Arm{Name: "IPv6", Slot: 0}, arms,
			perf.LatencyConfig{Rounds: max(1, rounds/4), Settle: 50 * time.Millisecond, Window: 100 * time.Millisecond,
				Rate: latencyRate, Seed: 17})
		if err != nil {
			return nil, err
		}
		out.RefLatency = lref.Result(latencyRate, nil)
		for i := range lres {
			out.Arms[i].Latency = lres[i].Result(latencyRate, &lref)
		}
	}
	return out, nil
}
