// Command portfilter is an SR-aware service written from the public
// documentation only (README, docs/userspace.md, go doc of pkg/srv6svc;
// no segchain internals): it drops every inner UDP packet to port 7
// (echo), tags the SRH of inner TCP to port 80 with --tag, and forwards
// the rest (End). Its unit test runs it with srv6svctest, without root.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/segchain/segchain/pkg/srv6svc"
	"github.com/segchain/segchain/pkg/srv6svc/svcflags"
)

func main() { svcflags.Main("portfilter", run) }

// filter is the handler: a pure function of the packet.
func filter(tag uint16) srv6svc.Handler {
	return func(p *srv6svc.Packet) srv6svc.Verdict {
		proto, l4, ok := transport(p.InnerProto(), p.Inner())
		if !ok {
			return srv6svc.Forward
		}
		dport := binary.BigEndian.Uint16(l4[2:])
		switch {
		case proto == 17 && dport == 7:
			return srv6svc.Drop
		case proto == 6 && dport == 80:
			p.SetTag(tag)
		}
		return srv6svc.Forward
	}
}

// transport finds the inner packet's transport header (IPv4 without
// fragments, or IPv6 with TCP/UDP right after its header).
func transport(innerProto uint8, b []byte) (proto uint8, l4 []byte, ok bool) {
	switch innerProto {
	case 4:
		if len(b) < 20 || b[0]>>4 != 4 || binary.BigEndian.Uint16(b[6:])&0x3fff != 0 {
			return 0, nil, false
		}
		ihl := int(b[0]&0xf) * 4
		if ihl < 20 || len(b) < ihl+4 {
			return 0, nil, false
		}
		return b[9], b[ihl:], true
	case 41:
		if len(b) < 44 || b[0]>>4 != 6 {
			return 0, nil, false
		}
		return b[6], b[40:], true
	}
	return 0, nil, false
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("portfilter", flag.ContinueOnError)
	var f svcflags.Flags
	f.Register(fs, "portfilter")
	tag := fs.Uint("tag", 80, "SRH tag written on inner TCP/80 packets")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := f.Config()
	if err != nil {
		return err
	}
	if *tag > 0xffff {
		return fmt.Errorf("--tag %d: at most 65535", *tag)
	}
	svc, err := srv6svc.Listen(cfg)
	if err != nil {
		return err
	}
	defer svc.Close()
	fmt.Fprintf(out, "portfilter: %d queue(s), %s\n", svc.Queues(), svc.Mode())
	err = svc.Serve(ctx, filter(uint16(*tag)))
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
