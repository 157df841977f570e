package session

import (
	"os"
	"runtime/debug"
	"sync"
)

// The collector of a command. A command (apply, plan, status) is a short
// process whose heap is mostly the plan, live until it exits: at the
// default GOGC=100 it marks that plan again every time the heap doubles,
// a tenth of a no-op apply's CPU on the controller (docs/scale.md,
// session 12b). The plan is live anyway, so marking it less often costs
// memory the command would not give back before it exits. A memory limit
// keeps the peak where it was at 1,000 nodes (docs/benchmarks.md, #33):
// the collector runs more often again as the heap nears it.
const (
	gcPercent = 300
	gcLimit   = 768 << 20
)

var gcOnce sync.Once

// tuneGC sets the command's GOGC and memory limit unless the environment
// sets them (GOGC, GOMEMLIMIT: the runtime's own reading wins).
func tuneGC() {
	gcOnce.Do(func() {
		if os.Getenv("GOGC") == "" {
			debug.SetGCPercent(gcPercent)
		}
		if os.Getenv("GOMEMLIMIT") == "" {
			debug.SetMemoryLimit(gcLimit)
		}
	})
}
