package perf

import (
	"errors"
	"net"
	"time"
)

// ErrNotSupported marks a recipe or testbed feature this kernel or testbed
// lacks; callers skip it and print the reason.
var ErrNotSupported = errors.New("not supported")

// Sample is a snapshot of a testbed's cumulative counters. Rates and costs
// are differences between two samples.
type Sample struct {
	At time.Time
	// Tx is the number of frames the generator handed to the tx port.
	Tx uint64
	// Rx is the number of packets the rx port counted (the sink).
	Rx uint64
	// SUTCPU is the CPU time (ns) spent by the SUT's packet-processing
	// thread, 0 when the testbed cannot measure it.
	SUTCPU uint64
	// SUTWait is the time (ns) that thread spent runnable but waiting for
	// its CPU (other work ran there), SUTSteal the time the hypervisor took
	// the SUT's CPU away (steal). Both 0 when unknown. A window in which
	// either is large measured the co-runners, not the SUT's throughput.
	SUTWait, SUTSteal uint64
}

// Delta is the difference between two samples.
type Delta struct {
	Dur               time.Duration
	Tx, Rx            uint64
	SUTCPU            uint64
	SUTWait, SUTSteal uint64
}

// Sub returns s − old.
func (s Sample) Sub(old Sample) Delta {
	return Delta{Dur: s.At.Sub(old.At), Tx: s.Tx - old.Tx, Rx: s.Rx - old.Rx, SUTCPU: s.SUTCPU - old.SUTCPU,
		SUTWait: s.SUTWait - old.SUTWait, SUTSteal: s.SUTSteal - old.SUTSteal}
}

// Busy is the fraction of the window the SUT thread ran (0 if unknown).
func (d Delta) Busy() float64 { return fraction(d.SUTCPU, d.Dur) }

// Lost is the fraction of the window the SUT thread was runnable but did
// not run: waiting for its CPU behind other work, or stolen by the
// hypervisor.
func (d Delta) Lost() float64 { return fraction(d.SUTWait+d.SUTSteal, d.Dur) }

func fraction(ns uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(ns) / float64(d.Nanoseconds())
}

// TxPPS is the offered rate.
func (d Delta) TxPPS() float64 { return perSecond(d.Tx, d.Dur) }

// RxPPS is the throughput.
func (d Delta) RxPPS() float64 { return perSecond(d.Rx, d.Dur) }

// DeliveryRatio is rx/tx (0 when nothing was sent).
func (d Delta) DeliveryRatio() float64 {
	if d.Tx == 0 {
		return 0
	}
	return float64(d.Rx) / float64(d.Tx)
}

// NsPerPacket is the SUT's CPU time per delivered packet (0 if unknown).
func (d Delta) NsPerPacket() float64 {
	if d.Rx == 0 || d.SUTCPU == 0 {
		return 0
	}
	return float64(d.SUTCPU) / float64(d.Rx)
}

func perSecond(n uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Generator sends frames built from templates held in numbered slots. The
// active slot and the rate can change while it runs.
type Generator interface {
	// Load puts a frame template into a slot (0 ≤ slot < MaxSlots()).
	Load(slot int, frame []byte) error
	MaxSlots() int
	// Select makes slot the template of every following frame.
	Select(slot int) error
	// SetRate limits the offered rate; 0 sends flat out.
	SetRate(pps uint64) error
	// Start begins sending (asynchronously); Stop ends it and returns the
	// error the generator stopped with, if any.
	Start() error
	Stop() error
}

// PristineGenerator is a Generator that can skip its per-frame template
// rewrite while the sink provably leaves frames untouched (a native
// XDP_DROP): the physical limit then measures the testbed, not the
// rewrite. With any stack on the path, frames are modified in place and
// the rewrite is required (the default).
type PristineGenerator interface {
	Generator
	// SetPristine takes effect at the next Start; any template switch or
	// reload during a run turns the rewrite back on until the next Start.
	SetPristine(on bool) error
}

// Env is what a recipe needs to configure the SUT and build its packets:
// the SUT's ports and the addresses and MACs on both sides.
type Env struct {
	// In is the SUT port facing the tester's tx port, Out the one facing
	// the rx port.
	In, Out string
	// InMAC is the destination MAC of generated frames, TxMAC their source.
	InMAC, TxMAC net.HardwareAddr
	// RxMAC is the MAC of the tester's rx port (the SUT's next hop).
	OutMAC, RxMAC net.HardwareAddr
	// Run executes a command (argv) on the SUT and returns its combined output.
	Run func(args ...string) (string, error)
	// Do runs fn with the calling thread in the SUT's network namespace
	// (netlink, bpf). Nil on testbeds where the SUT is remote.
	Do func(fn func() error) error
	// AddSUTTask pins a task (a thread ID of this process, e.g. a
	// userspace service's reader) to the SUT's CPU and counts its CPU time
	// as the SUT's in Sample.SUTCPU. Nil where the testbed cannot.
	AddSUTTask func(tid int) error
	// Cleanup registers fn to run when the testbed goes down, before its
	// namespaces go: recipes that start something besides kernel state
	// (a reader thread) stop it there. Nil where the testbed cannot.
	Cleanup func(fn func() error)
}

// Port addressing of every testbed (see docs/benchmarks.md).
const (
	SUTIn6    = "fc00:1::1"
	TesterTx6 = "fc00:1::2"
	SUTOut6   = "fc00:2::1"
	TesterRx6 = "fc00:2::2"
	SUTIn4    = "10.1.0.1"
	TesterTx4 = "10.1.0.2"
	SUTOut4   = "10.2.0.1"
	TesterRx4 = "10.2.0.2"
)

// Driver is a testbed: a tester with a tx and an rx port and a SUT between
// them (thesis Fig. 5.1). The built-in one is NetnsDriver; a two-host NIC
// testbed or TRex implements the same interface.
type Driver interface {
	Name() string
	// Up builds the testbed; Down tears down everything Up made, also
	// after a partial Up, and may be called more than once.
	Up() error
	Down() error
	Env() *Env
	Generator() Generator
	// Sample reads the cumulative counters.
	Sample() (Sample, error)
	// Sink switches where the rx counter counts; SinkForward is the normal
	// rx port after the SUT, the others measure the testbed's ceilings.
	Sink(k SinkKind) error
}

// SinkKind says where a testbed counts received packets.
type SinkKind int

const (
	// SinkForward counts what the SUT forwards out of its output port.
	SinkForward SinkKind = iota
	// SinkXDPDrop counts and drops at the SUT's input port in native XDP:
	// the generator's own ceiling, the physical limit of the testbed.
	SinkXDPDrop
	// SinkStackDrop counts and drops at the SUT's input port in tc ingress
	// (after skb allocation and GRO): the ceiling of any stack-based SUT.
	SinkStackDrop
	// SinkWire counts at the far end of the SUT's output link (the
	// tester's rx port, tc ingress): after the output port's qdisc, so
	// that a shaped wire (Experiment.Shape) limits what is counted.
	SinkWire
)

func (k SinkKind) String() string {
	switch k {
	case SinkForward:
		return "forward"
	case SinkXDPDrop:
		return "xdp-drop"
	case SinkStackDrop:
		return "stack-drop"
	case SinkWire:
		return "wire"
	}
	return "unknown"
}

// LatencyDriver is a testbed that measures per-packet latency: its
// generator stamps each frame with its send time and its sink records how
// long the frame took, per template slot (docs/benchmarks.md, "Latency").
// MeasureLatency drives it; the netns testbed implements it.
type LatencyDriver interface {
	Driver
	// SetLatency turns stamping and recording on or off. Off (the
	// default) the generator and the sink do exactly the work they did
	// before latency existed: throughput is measured with it off.
	SetLatency(on bool) error
	// Stamped reports whether the frames of a loaded slot carry a stamp
	// (their innermost payload has room for it).
	Stamped(slot int) bool
	// Latency reads the cumulative histogram of the packets built from
	// slot that reached the active sink, and the sink's cumulative count
	// of packets without a usable stamp.
	Latency(slot int) (LatencyHist, LatencyMisses, error)
}
