package boundary

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// AttachTCXFrom attaches boundary_in (TCX ingress, head) and boundary_out
// (TCX egress, tail) from another build of the filter's object (obj, a
// file with the same maps) to the interface ifindex of the current
// network namespace, with the tables Apply installed there, and returns
// the links unpinned. segchain's own cost benchmark uses it to measure a
// previous object in the same run as the current one.
func AttachTCXFrom(ifindex int, obj string) ([]link.Link, error) {
	n, err := open("", false)
	if err != nil {
		return nil, err
	}
	if n == nil {
		return nil, errors.New("no boundary tables in this namespace (apply first)")
	}
	defer n.close()
	spec, err := ebpf.LoadCollectionSpec(obj)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", obj, err)
	}
	var progs struct {
		In  *ebpf.Program `ebpf:"boundary_in"`
		Out *ebpf.Program `ebpf:"boundary_out"`
	}
	if err := spec.LoadAndAssign(&progs, &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		"bnd_lpm": n.objs.BndLpm, "bnd_counters": n.objs.BndCounters,
		"bnd_hmac_sids": n.objs.BndHmacSids, "bnd_hmac_keys": n.objs.BndHmacKeys}}); err != nil {
		return nil, fmt.Errorf("load boundary programs of %s: %w", obj, err)
	}
	defer progs.In.Close()
	defer progs.Out.Close()
	in, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: progs.In, Attach: ebpf.AttachTCXIngress, Anchor: link.Head()})
	if err != nil {
		return nil, fmt.Errorf("attach %s boundary_in: %w", obj, err)
	}
	out, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: progs.Out, Attach: ebpf.AttachTCXEgress, Anchor: link.Tail()})
	if err != nil {
		_ = in.Close()
		return nil, fmt.Errorf("attach %s boundary_out: %w", obj, err)
	}
	return []link.Link{in, out}, nil
}
