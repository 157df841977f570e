package perf

import (
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// Per-arm state on one port. Some costs sit on an interface (a TCX or XDP
// program), so within one generator run they cannot be present for one
// arm's frames and absent for the reference's through different ports
// (this kernel has no VLAN or macvlan devices to give each arm a port of
// its own). Instead the generator's template switch to an arm also sets
// the SUT's state for that arm (attach its programs, detach the
// reference's), before the sandwich's settle time: REF (none), X (with),
// REF, ... (boundaryperf, poolperf).

// SwitchingGenerator is a generator whose Select first calls Before with
// the slot, e.g. to attach the arm's programs.
type SwitchingGenerator struct {
	Generator
	Before func(slot int) error
}

// Select sets the slot's state, then its template.
func (g SwitchingGenerator) Select(slot int) error {
	if err := g.Before(slot); err != nil {
		return err
	}
	return g.Generator.Select(slot)
}

// WithGenerator is d whose Generator is g; a LatencyDriver stays one.
func WithGenerator(d Driver, g Generator) Driver {
	if ld, ok := d.(LatencyDriver); ok {
		return genLatDriver{LatencyDriver: ld, g: g}
	}
	return genDriver{Driver: d, g: g}
}

type genDriver struct {
	Driver
	g Generator
}

func (d genDriver) Generator() Generator { return d.g }

type genLatDriver struct {
	LatencyDriver
	g Generator
}

func (d genLatDriver) Generator() Generator { return d.g }

// EmptyTC is a TC program that returns TC_ACT_UNSPEC (TCX_NEXT) at once:
// attached, it measures what the hook itself costs.
func EmptyTC() (*ebpf.Program, error) {
	return ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()}})
}
