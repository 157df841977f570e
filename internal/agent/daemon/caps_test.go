package daemon

import (
	"testing"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/local"
)

// The daemon's agents declare their own feature probe (cached) and
// stepped batches (under the node's lock), not the embedded Local's: a
// capability inherited from Local would run without the lock and
// without suspending the intent. The reconcile's agent journals each op
// and offers no stepping around the server's lease.
func TestDaemonCaps(t *testing.T) {
	l := &lockedLocal{Local: local.NewLocal("nfv1", "ns-none")}
	c := l.Caps()
	if c.Features != agent.FeatureChecker(l) || c.Steps != agent.Stepper(l) {
		t.Errorf("lockedLocal.Caps: Features %T, Steps %T, want the lockedLocal's own", c.Features, c.Steps)
	}
	if c.Check == nil || c.Boundary == nil || c.Routes == nil || c.Links == nil || c.Preflight != nil || c.Intents != nil || c.JournalsEachOp {
		t.Errorf("lockedLocal.Caps = %+v, want Local's other capabilities and no remote ones", c)
	}
	r := &reconcileAgent{lockedLocal: l}
	rc := r.Caps()
	if !rc.JournalsEachOp || rc.Steps != nil || rc.Features != agent.FeatureChecker(l) {
		t.Errorf("reconcileAgent.Caps = %+v, want JournalsEachOp, no Steps, lockedLocal's Features", rc)
	}
}
