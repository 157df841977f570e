package cpbench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Repeated no-ops, for developers comparing builds (docs/benchmarks.md,
// #33): a no-op at 250 nodes varies by tens of percent from one lab to
// the next on a shared machine, more than most changes it measures.
const (
	// NoOpsEnv=K repeats the no-op K more times on the same lab.
	NoOpsEnv = "SEGCHAIN_CPBENCH_NOOPS"
	// AltExeEnv=PATH runs every other repeated no-op with that segchain
	// binary's controller instead (the agents stay): an A/B of the
	// controller, interleaved, against the same agents.
	AltExeEnv = "SEGCHAIN_CPBENCH_ALT_EXE"
)

// NoOpRun is one repeated no-op.
type NoOpRun struct {
	Exe           string        `json:"exe"` // "alt": AltExeEnv's
	Wall          time.Duration `json:"wall_ns"`
	ControllerCPU time.Duration `json:"controller_cpu_ns"`
	AgentsCPU     time.Duration `json:"agents_cpu_ns"`
	// NotPlanned: this no-op made no plan (docs/scale.md, "Session 16").
	NotPlanned bool `json:"not_planned,omitempty"`
}

// notPlanned: apply's output says it made no plan.
func notPlanned(out string) bool { return strings.Contains(out, "not planned") }

// repeatNoOps runs NoOpsEnv more no-ops with apply(exe), cpu being the
// last apply's CPU.
func repeatNoOps(exe string, pids map[int]int, apply func(exe string) (time.Duration, string, error), cpu func() time.Duration) ([]NoOpRun, error) {
	k, _ := strconv.Atoi(os.Getenv(NoOpsEnv))
	alt := os.Getenv(AltExeEnv)
	var out []NoOpRun
	for i := 0; i < k; i++ {
		use, name := exe, "exe"
		if alt != "" && i%2 == 1 {
			use, name = alt, "alt"
		}
		a0 := cpuOf(pids)
		d, o, err := apply(use)
		if err != nil {
			return out, err
		}
		if !strings.Contains(o, "no changes") {
			return out, fmt.Errorf("repeated no-op %d changed something:\n%s", i+1, o)
		}
		out = append(out, NoOpRun{Exe: name, Wall: d, ControllerCPU: cpu(), AgentsCPU: cpuOf(pids) - a0, NotPlanned: notPlanned(o)})
	}
	return out, nil
}
