package srv6svc

import "context"

// InnerVerdict is what an SR-unaware function (End.ASM) answers.
type InnerVerdict uint8

const (
	// Pass: the inner packet continues unchanged.
	Pass InnerVerdict = iota
	// Modified: the function edited the inner packet in place; the
	// library fixes its lengths and checksums.
	Modified
	// Discard: the packet is dropped.
	Discard
)

// InnerFunc is an SR-unaware processing function for End.ASM: it gets the
// inner packet only, a view into the shared UMEM frame (it may edit it in
// place, not keep it). The outer header and the SRH never leave the frame.
type InnerFunc func(inner []byte) InnerVerdict

// ServeASM serves the binding as End.ASM, the shared-memory SR proxy:
// every packet's inner packet goes to fn; on Pass or Modified End is
// applied (Segments Left − 1, destination ← next segment) and the packet
// leaves from the same frame; on Discard it is dropped. Packets are handed
// over in batches (Config.BatchSize); `segchain sid show` lists the
// binding as End.ASM.
func (s *Service) ServeASM(ctx context.Context, fn InnerFunc) error {
	s.asm.Store(true)
	return s.ServeBatch(ctx, asmHandler(fn))
}

// asmHandler runs fn as a batch handler: End.ASM's semantics.
func asmHandler(fn InnerFunc) BatchHandler {
	return func(pkts []*Packet, vs []Verdict) {
		for i, p := range pkts {
			switch fn(p.Inner()) {
			case Discard:
				vs[i] = Drop
			case Modified:
				p.MarkInnerModified()
			}
		}
	}
}
