package devprofile

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// PhaseEnv, when set, makes a segchain process print to stderr the wall
// clock at which each phase of a command ends (Phase), relative to the
// process start: where a control-plane run spends its time, beside the
// CPU profile (Env), which does not show time spent waiting on agents.
const PhaseEnv = "SEGCHAIN_PHASES"

var (
	phaseOn    = os.Getenv(PhaseEnv) != ""
	phaseStart = time.Now()
	phaseMu    sync.Mutex
	phaseLast  = phaseStart
)

// Phase notes that a phase named what ended (a no-op unless PhaseEnv is
// set).
func Phase(what string) {
	if !phaseOn {
		return
	}
	phaseMu.Lock()
	defer phaseMu.Unlock()
	now := time.Now()
	fmt.Fprintf(os.Stderr, "segchain: phase %-24s +%8.1f ms  (at %8.1f ms)\n", what,
		float64(now.Sub(phaseLast).Microseconds())/1000, float64(now.Sub(phaseStart).Microseconds())/1000)
	phaseLast = now
}
