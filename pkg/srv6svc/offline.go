package srv6svc

import (
	"net/netip"

	"github.com/segchain/segchain/pkg/srv6svc/internal/offline"
)

// outcome is what finish did with a packet.
type outcome uint8

const (
	outSend outcome = iota
	outDropVerdict
	outDropBad
)

// finish carries out a packet's verdict (the frame is then ready to send).
func (p *Packet) finish(v Verdict) outcome {
	if v == Drop {
		return outDropVerdict
	}
	if !p.apply(v) {
		return outDropBad
	}
	return outSend
}

func init() { offline.Run = runOffline }

// runOffline is a worker without sockets: each frame gets its own chunk
// (the XDP headroom before it, as from the kernel), then parse, the
// handler and finish run exactly as on the live path.
func runOffline(frames [][]byte, bound []netip.Prefix, csid [2]int, batch int, handler any) []offline.Result {
	f := CSIDFormat{LBLen: csid[0], NFLen: csid[1]}
	var h BatchHandler
	switch f := handler.(type) {
	case BatchHandler:
		h = f
	case Handler:
		h, batch = func(p []*Packet, v []Verdict) { v[0] = f(p[0]) }, 1
	case InnerFunc:
		h = asmHandler(f)
	default:
		panic("srv6svc offline: not a handler")
	}
	if batch <= 0 {
		batch = 64
	}
	res := make([]offline.Result, len(frames))
	for lo := 0; lo < len(frames); lo += batch {
		hi := min(lo+batch, len(frames))
		var (
			pkts []*Packet
			idx  []int
		)
		for i := lo; i < hi; i++ {
			mem := make([]byte, frameSize)
			if len(frames[i]) > frameSize-xdpHeadOff {
				res[i].Dropped = "malformed: longer than a frame"
				continue
			}
			n := copy(mem[xdpHeadOff:], frames[i])
			p := &Packet{mem: mem, addr: xdpHeadOff}
			if err := p.parse(mem[xdpHeadOff:xdpHeadOff+n:frameSize], f); err != nil {
				res[i].Dropped = "malformed: " + err.Error()
				continue
			}
			p.Bound = match(bound, p.outer.Dst)
			pkts = append(pkts, p)
			idx = append(idx, i)
		}
		if len(pkts) == 0 {
			continue
		}
		vs := make([]Verdict, len(pkts))
		h(pkts, vs)
		for j, p := range pkts {
			r := &res[idx[j]]
			r.Ran, r.Verdict = true, uint8(vs[j])
			out := p.finish(vs[j])
			r.Modified = p.modified
			switch out {
			case outDropVerdict:
				r.Dropped = "verdict"
			case outDropBad:
				r.Dropped = "bad verdict"
			default:
				r.Out = append([]byte(nil), p.buf...)
			}
		}
	}
	return res
}
