package local

import (
	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/dataplane"
)

// loopRoute installs, moves or removes a route on the service loop
// (dataplane.LoopDev: a SID served by a tc program reached from a service
// on the same node, or a kernel-served SID right after another one, whose
// seg6local route cannot be on lo). The loop exists while a route uses
// it, and the node's tc programs are attached to it as soon as it exists.
func (l *Local) loopRoute(h *dataplane.Handle, op agent.Op) error {
	if op.Action == agent.ActDelete {
		if err := h.DeleteRoute(*op.Route); err != nil {
			return err
		}
		return h.RemoveLoopIfUnused()
	}
	if op.Route.Dev != dataplane.LoopDev {
		// Moved off the loop (replaced in place: the route never
		// disappears); the loop goes with its last route.
		if err := h.ReplaceRoute(*op.Route); err != nil {
			return err
		}
		return h.RemoveLoopIfUnused()
	}
	if err := h.EnsureLoop(); err != nil {
		return err
	}
	for _, k := range serviceKinds() {
		if err := k.AttachNew(l.netns); err != nil {
			return err
		}
	}
	return h.ReplaceRoute(*op.Route)
}
