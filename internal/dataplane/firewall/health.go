package firewall

import (
	"fmt"

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
	n, err := newNode(netns, name)
	if err != nil {
		return bpfpin.Health{}, nil, err
	}
	h, err := program.Health(netns, n.dir, "fw_tc", "fw_sids")
	return h, n, err
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
