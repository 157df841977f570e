package fw

import (
	"fmt"
	"path/filepath"

	"github.com/segchain/segchain/internal/bpfpin"
)

// Check reports what is wrong with the firewall's eBPF objects in netns
// (bpfpin.Check: maps, links, program, orphans), nil when nothing is or
// no firewall state exists.
func Check(netns string) ([]string, error) {
	h, _, err := health(netns)
	return h.Problems, err
}

func health(netns string) (bpfpin.Health, *Node, error) {
	name, err := nsName(netns, false)
	if err != nil {
		return bpfpin.Health{}, nil, err
	}
	n := &Node{netns: netns, dir: filepath.Join(PinRoot, name, "fw"), state: filepath.Join(StateRoot, name)}
	spec, err := n.spec()
	if err != nil {
		return bpfpin.Health{}, n, err
	}
	return bpfpin.Check(netns, n.dir, spec, "fw_tc", "fw_sids"), n, nil
}

// Repair makes the firewall state of netns fit for Apply: broken links
// are dropped (Apply attaches again), broken or orphaned maps are removed
// with the rule files (Apply installs every instance again).
func Repair(netns string) error {
	h, n, err := health(netns)
	if err != nil || h.OK() {
		return err
	}
	if h.MapsBad {
		return n.teardown()
	}
	if err := bpfpin.Repair(n.dir, h); err != nil {
		return fmt.Errorf("repair firewall in %s: %w", n.dir, err)
	}
	return nil
}
