package agent

import (
	"github.com/segchain/segchain/internal/dataplane"
	"github.com/segchain/segchain/internal/fw"
	"github.com/segchain/segchain/internal/proxy"
)

// loopRoute installs or removes a route through the service loop
// (dataplane.LoopDev: a SID served by a tc program, reached from a service
// on the same node). The loop exists while a route uses it, and the
// node's tc programs are attached to it as soon as it exists.
func (l *Local) loopRoute(h *dataplane.Handle, op Op) error {
	if op.Action == ActDelete {
		if err := h.DeleteRoute(*op.Route); err != nil {
			return err
		}
		return h.RemoveLoopIfUnused()
	}
	if err := h.EnsureLoop(); err != nil {
		return err
	}
	if err := proxy.AttachNew(l.netns); err != nil {
		return err
	}
	if err := fw.AttachNew(l.netns); err != nil {
		return err
	}
	return h.ReplaceRoute(*op.Route)
}
