package boundary

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// AttachXDP attaches the boundary's XDP ingress program (native mode) and
// its TCX egress program to the interface ifindex of the current network
// namespace, with the tables Apply installed there, and returns the links
// unpinned: closing them detaches. segchain perf boundary measures the XDP
// variant with it.
func AttachXDP(ifindex int) ([]link.Link, error) {
	n, err := open("", false)
	if err != nil {
		return nil, err
	}
	if n == nil {
		return nil, errors.New("no boundary tables in this namespace (apply first)")
	}
	defer n.close()
	spec, err := loadBoundaryTC()
	if err != nil {
		return nil, err
	}
	var progs boundaryTCPrograms
	if err := spec.LoadAndAssign(&progs, &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		"bnd_lpm": n.objs.BndLpm, "bnd_counters": n.objs.BndCounters,
		"bnd_hmac_sids": n.objs.BndHmacSids, "bnd_hmac_keys": n.objs.BndHmacKeys}}); err != nil {
		return nil, fmt.Errorf("load boundary programs: %w", err)
	}
	defer progs.Close()
	x, err := link.AttachXDP(link.XDPOptions{Interface: ifindex, Program: progs.BoundaryXdp, Flags: link.XDPDriverMode})
	if err != nil {
		return nil, fmt.Errorf("attach boundary xdp: %w", err)
	}
	out, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: progs.BoundaryOut, Attach: ebpf.AttachTCXEgress, Anchor: link.Tail()})
	if err != nil {
		_ = x.Close()
		return nil, fmt.Errorf("attach boundary egress: %w", err)
	}
	return []link.Link{x, out}, nil
}
