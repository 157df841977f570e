package srunaware

import (
	"fmt"

	"github.com/segchain/segchain/internal/bpfpin"
)

// Check reports what is wrong with the proxies' eBPF objects in netns
// (bpfpin.Check: maps, links, program, orphans), nil when nothing is or
// no proxy state exists.
func Check(netns string) ([]string, error) {
	h, _, err := health(netns)
	return h.Problems, err
}

func health(netns string) (bpfpin.Health, string, error) {
	dir, err := pinDir(netns, false)
	if err != nil {
		return bpfpin.Health{}, "", err
	}
	h, err := program.Health(netns, dir, "proxy_tc", "sids_map")
	return h, dir, err
}

// Repair makes the proxy state of netns fit for Apply: broken links are
// dropped (Apply attaches again), broken or orphaned maps are removed
// with everything else (Apply installs every SID again).
func Repair(netns string) error {
	h, dir, err := health(netns)
	if err != nil || h.OK() {
		return err
	}
	if err := bpfpin.Repair(dir, h); err != nil {
		return fmt.Errorf("repair proxies in %s: %w", dir, err)
	}
	return nil
}
