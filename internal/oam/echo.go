package oam

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nsutil"
)

// Echo is the native-SID echo responder on one node (bpf/oam_echo.bpf.c):
// a TCX ingress program on its interfaces that answers ICMPv6 echo
// requests to the node's native SIDs, which Linux's seg6local drops.
type Echo struct {
	objs  oamEchoObjects
	links []link.Link
	sids  []netip.Prefix
}

// AttachEcho attaches the responder to every interface but loopback of
// namespace ns, for the SIDs of its seg6local routes (read now: a SID
// added later is answered after the next AttachEcho).
func AttachEcho(ns string) (e *Echo, err error) {
	sids, err := localSIDs(ns)
	if err != nil {
		return nil, err
	}
	e = &Echo{sids: sids}
	if err := loadOamEchoObjects(&e.objs, nil); err != nil {
		return nil, fmt.Errorf("load the echo responder: %w", err)
	}
	for _, p := range sids {
		k := oamEchoOamSidKey{Prefixlen: uint32(p.Bits()), Addr: p.Addr().As16()}
		if err := e.objs.OamSids.Put(k, uint8(1)); err != nil {
			e.objs.Close()
			return nil, fmt.Errorf("oam_sids %s: %w", p, err)
		}
	}
	if e.links, err = attachAll(ns, e.objs.OamEcho, ebpf.AttachTCXIngress); err != nil {
		e.objs.Close()
		return nil, fmt.Errorf("attach the echo responder: %w", err)
	}
	return e, nil
}

// localSIDs are the prefixes of namespace ns's seg6local routes (every
// table).
func localSIDs(ns string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	err := nsutil.Do(ns, func() error {
		rs, err := netlink.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.Encap == nil || r.Encap.Type() != unix.LWTUNNEL_ENCAP_SEG6_LOCAL || r.Dst == nil {
				continue
			}
			a, ok := netip.AddrFromSlice(r.Dst.IP)
			bits, _ := r.Dst.Mask.Size()
			if ok && a.Is6() {
				out = append(out, netip.PrefixFrom(a, bits).Masked())
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("namespace %s: its seg6local routes: %w", ns, err)
	}
	return out, nil
}

// Serves reports whether a falls in one of the seg6local SIDs the
// responder answers for (a SID segchain serves from a tc program, an SR
// proxy's or End.AN.FW's, is none of them).
func (e *Echo) Serves(a netip.Addr) bool {
	for _, p := range e.sids {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Answered is how many echo requests the responder answered.
func (e *Echo) Answered() (uint64, error) {
	var per []uint64
	if err := e.objs.OamEchoStats.Lookup(uint32(0), &per); err != nil {
		return 0, err
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n, nil
}

// Close detaches the responder.
func (e *Echo) Close() error {
	var errs []error
	for _, l := range e.links {
		errs = append(errs, l.Close())
	}
	errs = append(errs, e.objs.Close())
	return errors.Join(errs...)
}

// SIDs is how many SID prefixes the responder answers.
func (e *Echo) SIDs() (int, error) {
	n := 0
	var k oamEchoOamSidKey
	it := e.objs.OamSids.Iterate()
	var v uint8
	for it.Next(&k, &v) {
		n++
	}
	return n, it.Err()
}

// Refresh reads namespace ns's SIDs again (an apply changed them) and
// answers exactly those.
func (e *Echo) Refresh(ns string) (int, error) {
	sids, err := localSIDs(ns)
	if err != nil {
		return 0, err
	}
	want := map[oamEchoOamSidKey]bool{}
	for _, p := range sids {
		k := oamEchoOamSidKey{Prefixlen: uint32(p.Bits()), Addr: p.Addr().As16()}
		want[k] = true
		if err := e.objs.OamSids.Put(k, uint8(1)); err != nil {
			return 0, fmt.Errorf("oam_sids %s: %w", p, err)
		}
	}
	var k oamEchoOamSidKey
	var v uint8
	var gone []oamEchoOamSidKey
	it := e.objs.OamSids.Iterate()
	for it.Next(&k, &v) {
		if !want[k] {
			gone = append(gone, k)
		}
	}
	if err := it.Err(); err != nil {
		return 0, err
	}
	for _, k := range gone {
		if err := e.objs.OamSids.Delete(k); err != nil {
			return 0, fmt.Errorf("oam_sids: %w", err)
		}
	}
	return len(want), nil
}
