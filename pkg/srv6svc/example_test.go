package srv6svc_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/netip"
	"sync/atomic"

	"github.com/segchain/segchain/pkg/srv6svc"
)

// A counting service: every packet of SID fc00:5::100 is counted and
// forwarded (End). Run as root on a node whose SRv6 traffic arrives on eth0.
func Example() {
	svc, err := srv6svc.Listen(srv6svc.Config{
		Name:       "counter",
		SIDs:       []netip.Prefix{netip.MustParsePrefix("fc00:5::100/128")},
		Interfaces: []string{"eth0"},
		OnFailure:  srv6svc.OnFailureBypass, // if this process dies, the kernel applies End
	})
	if err != nil {
		log.Fatal(err)
	}
	defer svc.Close()
	log.Printf("serving %d queue(s), %s", svc.Queues(), svc.Mode())
	var n atomic.Uint64
	err = svc.Serve(context.Background(), func(p *srv6svc.Packet) srv6svc.Verdict {
		n.Add(1)
		return srv6svc.Forward
	})
	if err != nil {
		log.Fatal(err)
	}
}

// A handler decides per packet from the SRH and the ARGS of the SID prefix.
func ExampleHandler() {
	var h srv6svc.Handler = func(p *srv6svc.Packet) srv6svc.Verdict {
		switch {
		case p.Args() == 1: // ARGS bits of the active SID ask for a drop
			return srv6svc.Drop
		case p.SRH().SegmentsLeft >= 2 && p.Segment(int(p.SRH().SegmentsLeft)-1) == p.Segment(0):
			return srv6svc.GoLast
		}
		return srv6svc.Forward
	}
	_ = h
	fmt.Println("ok")
	// Output: ok
}

// A payload transform: the inner packet is replaced; the library fixes the
// inner IPv4/IPv6 and TCP/UDP lengths and checksums and the outer payload
// length.
func ExamplePacket_SetInner() {
	var h srv6svc.Handler = func(p *srv6svc.Packet) srv6svc.Verdict {
		in := append([]byte(nil), p.Inner()...)
		in = append(in, "trailer"...)
		if err := p.SetInner(in); err != nil {
			return srv6svc.Drop
		}
		return srv6svc.Forward
	}
	_ = h
}

// Steering around the rest of the chain: the packet goes to two other SIDs
// instead of the remaining ones.
func ExamplePacket_SetNextSegments() {
	var h srv6svc.Handler = func(p *srv6svc.Packet) srv6svc.Verdict {
		scrub := netip.MustParseAddr("fc00:7::10")
		final := p.Segment(0)
		if err := p.SetNextSegments(scrub, final); err != nil {
			return srv6svc.Drop
		}
		return srv6svc.Forward
	}
	_ = h
}

// End.ASM: an SR-unaware function sees only the inner packet.
func ExampleService_ServeASM() {
	svc, err := srv6svc.Listen(srv6svc.Config{
		Name:       "asm-ttl",
		SIDs:       []netip.Prefix{netip.MustParsePrefix("fc00:5::200/128")},
		Interfaces: []string{"eth0"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer svc.Close()
	_ = svc.ServeASM(context.Background(), func(inner []byte) srv6svc.InnerVerdict {
		if len(inner) < 20 || inner[0]>>4 != 4 {
			return srv6svc.Pass
		}
		inner[8] = 64 // reset the IPv4 TTL
		return srv6svc.Modified
	})
}

// The bindings of a namespace with their counters, as `segchain sid show`
// prints them.
func ExampleStatus() {
	bs, err := srv6svc.Status("")
	if err != nil {
		log.Fatal(err)
	}
	for _, b := range bs {
		fmt.Println(b.Name, b.SIDs, b.State, b.Counters.RX)
	}
}

// SRH edits write to the frame: tag the packet, add a TLV, and keep its
// HMAC valid (or drop it explicitly with RemoveHMAC).
func ExamplePacket_SignHMAC() {
	key := []byte("the chain's HMAC secret")
	var h srv6svc.Handler = func(p *srv6svc.Packet) srv6svc.Verdict {
		p.SetTag(42) // the Tag is not covered by the HMAC
		if err := p.AddTLV(0x80, []byte("seen-by-ids")); err != nil {
			return srv6svc.Drop
		}
		p.SetFlags(p.SRH().Flags | 0x01) // covered: re-sign (or RemoveHMAC)
		if err := p.SignHMAC(1001, key); err != nil {
			return srv6svc.Drop
		}
		return srv6svc.Forward
	}
	_ = h
}

// Errors are typed: a bad configuration lists every problem.
func ExampleConfigError() {
	_, err := srv6svc.Listen(srv6svc.Config{Name: "x"})
	var ce *srv6svc.ConfigError
	if errors.As(err, &ce) {
		for _, p := range ce.Problems {
			fmt.Println(p)
		}
	}
	// Output:
	// sids: at least one SID is needed
	// interfaces: at least one interface is needed
}
