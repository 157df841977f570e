package lab

import (
	"errors"
	"fmt"

	"github.com/segchain/segchain/internal/config"
)

// FromDomain derives the lab topology of a domain: one node per domain node
// (nodes with role host do not forward; every other role does) with the
// node's sysctls, and one link per domain link with the addresses
// config.Domain.Interfaces derives (the link prefixes with the node ID as
// host part: fc00:12::/64 gives node 2 fc00:12::2/64). Links whose
// endpoints do not resolve, or whose prefixes cannot hold a node's ID, are
// errors. The lab name and file are left for the caller to set.
func FromDomain(d *config.Domain) (Topology, error) {
	if d == nil {
		return Topology{}, errors.New("lab from domain: no domain")
	}
	var t Topology
	var errs []error
	for _, n := range d.NodeNames() {
		dn := d.Nodes[n]
		if dn == nil {
			errs = append(errs, fmt.Errorf("nodes.%s: empty node", n))
			continue
		}
		node := Node{Name: n, Router: dn.Role != config.RoleHost, NoSRv6: dn.Role == config.RoleSF}
		if len(dn.Sysctls) > 0 {
			node.Sysctls = make(map[string]string, len(dn.Sysctls))
			for k, v := range dn.Sysctls {
				node.Sysctls[k] = v
			}
		}
		t.Nodes = append(t.Nodes, node)
	}
	byLink := map[int][]config.Interface{}
	for _, i := range d.Interfaces() {
		byLink[i.Link] = append(byLink[i.Link], i)
	}
	for li, dl := range d.Links {
		p := fmt.Sprintf("links[%d]", li)
		ends := byLink[li]
		if dl == nil || len(ends) != 2 {
			errs = append(errs, fmt.Errorf("%s.endpoints: want two node:iface endpoints of known nodes", p))
			continue
		}
		if ends[0].Node+":"+ends[0].Name != dl.Endpoints[0] {
			ends[0], ends[1] = ends[1], ends[0] // keep file order: a is endpoints[0]
		}
		want := 0
		for _, s := range []string{dl.IPv6, dl.IPv4} {
			if s != "" {
				want++
			}
		}
		var eps [2]Endpoint
		for j, e := range ends {
			if len(e.Addrs) != want {
				errs = append(errs, fmt.Errorf("%s: %s:%s: %d of %d addresses derivable (bad prefix, or node id %d does not fit it)",
					p, e.Node, e.Name, len(e.Addrs), want, d.Nodes[e.Node].ID))
			}
			eps[j] = Endpoint{Node: e.Node, Iface: e.Name, Addrs: e.Addrs}
		}
		lk := Link{A: eps[0], B: eps[1]}
		if fabric(d, lk.A.Node) && fabric(d, lk.B.Node) {
			lk.MTU = FabricMTU
		}
		t.Links = append(t.Links, lk)
	}
	if err := errors.Join(errs...); err != nil {
		return Topology{}, fmt.Errorf("lab from domain: %w", err)
	}
	return t, nil
}

// FabricMTU is the MTU of links between two SRv6-domain nodes. As on a real
// SR fabric, it leaves room for the SRv6 headers a headend or proxy adds to a
// full-size packet from a host link (1500): the kernel neither fragments a
// forwarded packet after seg6 encapsulation nor sends the host a Packet Too
// Big for it, so with equal MTUs bulk TCP through a chain stalls.
const FabricMTU = 9000

// fabric reports whether a domain node is inside the SRv6 domain (not a
// host or a service function).
func fabric(d *config.Domain, node string) bool {
	n := d.Nodes[node]
	return n != nil && n.Role != config.RoleHost && n.Role != config.RoleSF
}
