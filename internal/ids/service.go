package ids

import (
	"net/netip"

	"github.com/segchain/segchain/pkg/srv6svc"
)

// IP protocol numbers of what follows the SRH.
const (
	protoIPv4     = 4
	protoIPv6     = 41
	protoNoNext   = 59
	protoEthernet = 143
)

// ServiceScratch turns pkg/srv6svc packets into Packets. It keeps the
// segment list and the insert-mode buffer between calls, so a service
// that reuses one per worker (or takes them from a sync.Pool) allocates
// nothing per packet. One scratch serves one packet at a time.
type ServiceScratch struct {
	p    Packet
	segs []netip.Addr
	buf  []byte
}

// FromService fills the scratch's Packet from sp and returns it; it is
// valid until the next call. Encap mode inspects the inner packet; insert
// mode the original packet rebuilt without the SRH; an inner Ethernet
// frame or no next header leaves Inner empty (counted as not-ip).
func (s *ServiceScratch) FromService(sp *srv6svc.Packet) *Packet {
	p := &s.p
	*p = Packet{
		OuterSrc: sp.Outer().Src, OuterDst: sp.Outer().Dst,
		SL: int(sp.SRH().SegmentsLeft), Args: sp.Args(), Tag: sp.SRH().Tag,
	}
	if sp.HasSRH() {
		s.segs = sp.AppendSegments(s.segs[:0])
		p.Segments = s.segs
	}
	// else a uSID container holding the rest of the chain, no SRH (a
	// binding with srv6svc.Config.CSID): a packet without an SRH, whose
	// positive srv6.* conditions fail (nil Segments, docs/ids.md).
	switch proto := sp.InnerProto(); proto {
	case protoIPv4, protoIPv6: // encap mode
		p.Inner = sp.Inner()
	case protoEthernet, protoNoNext:
	default: // insert mode: the original packet, SRH removed
		s.buf = AppendInsertInner(s.buf[:0], sp.Frame()[14:54], sp.Segment(0), proto, sp.Inner())
		p.Inner = s.buf
	}
	return p
}

// ServiceVerdict is the service verdict of an engine verdict: Drop drops,
// everything else continues the chain.
func ServiceVerdict(v Verdict) srv6svc.Verdict {
	if v == Drop {
		return srv6svc.Drop
	}
	return srv6svc.Forward
}
