package perf

import (
	"errors"
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// AttachTCXHead attaches p first in dev's TCX chain (ingress or egress,
// by at): ahead of the testbed's forwarding sink, which ends the output
// port's chain. Cost recipes attach the programs an arm measures this way
// and detach them (CloseLinks) when another arm runs. Call it inside
// Env.Do: dev is a SUT port.
func AttachTCXHead(dev string, p *ebpf.Program, at ebpf.AttachType) (link.Link, error) {
	return attachTCX(dev, p, at, link.Head())
}

func attachTCX(dev string, p *ebpf.Program, at ebpf.AttachType, anchor link.Anchor) (link.Link, error) {
	i, err := net.InterfaceByName(dev)
	if err != nil {
		return nil, err
	}
	l, err := link.AttachTCX(link.TCXOptions{Interface: i.Index, Program: p, Attach: at, Anchor: anchor})
	if err != nil {
		return nil, fmt.Errorf("attach to %s: %w", dev, err)
	}
	return l, nil
}

// AttachTCXTail attaches p last in dev's TCX chain: behind a program an
// arm keeps for the whole run (perf pools --boundary). Not on the output
// port's egress, which the sink ends.
func AttachTCXTail(dev string, p *ebpf.Program, at ebpf.AttachType) (link.Link, error) {
	return attachTCX(dev, p, at, link.Tail())
}

// CloseLinks detaches every link and empties the list, with every error.
func CloseLinks(ls *[]link.Link) error {
	var errs []error
	for _, l := range *ls {
		errs = append(errs, l.Close())
	}
	*ls = nil
	return errors.Join(errs...)
}
