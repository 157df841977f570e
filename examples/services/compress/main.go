// Command compress is an SR-aware payload transform: at one SID it
// compresses the UDP payload of the inner packets (raw DEFLATE, RFC 1951),
// at another (--mode decompress) it restores it. The inner packet changes
// length; pkg/srv6svc fixes the inner IPv4/IPv6 and UDP lengths and
// checksums and the outer payload length. TCP and other inner packets pass
// unchanged (compressing a TCP payload would need sequence-number
// rewriting).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"compress/flate"

	"github.com/segchain/segchain/pkg/srv6svc"
	"github.com/segchain/segchain/pkg/srv6svc/svcflags"
)

func main() { svcflags.Main("compress", run) }

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("compress", flag.ContinueOnError)
	var f svcflags.Flags
	f.Register(fs, "compress")
	mode := fs.String("mode", "compress", "compress or decompress")
	level := fs.Int("level", flate.BestSpeed, "DEFLATE level 1..9")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: compress --sid SID --dev DEV [--mode compress|decompress] [flags]\n\nCompresses (or restores) the UDP payload of the SIDs' inner packets and forwards them (End).\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *mode != "compress" && *mode != "decompress" {
		return fmt.Errorf("--mode %q: want compress or decompress", *mode)
	}
	if *level < flate.BestSpeed || *level > flate.BestCompression {
		return fmt.Errorf("--level %d: want 1..9", *level)
	}
	cfg, err := f.Config()
	if err != nil {
		return err
	}
	t := newTransform(*mode == "compress", *level)
	svc, err := srv6svc.Listen(cfg)
	if err != nil {
		return err
	}
	defer svc.Close()
	fmt.Fprintf(out, "compress: %s, %d queue(s), %s\n", *mode, svc.Queues(), svc.Mode())
	err = svc.Serve(ctx, t.handle)
	fmt.Fprintf(out, "compress: %s\n", t.stats())
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// transform compresses or decompresses UDP payloads.
type transform struct {
	compress                      bool
	level                         int
	pool                          sync.Pool // *scratch, one per concurrent worker
	done, passed, failed, in, out atomic.Uint64
}

type scratch struct {
	buf bytes.Buffer
	w   *flate.Writer
	r   io.ReadCloser
	pkt []byte
}

func newTransform(compress bool, level int) *transform {
	t := &transform{compress: compress, level: level}
	t.pool.New = func() any {
		w, _ := flate.NewWriter(nil, level)
		return &scratch{w: w, r: flate.NewReader(bytes.NewReader(nil))}
	}
	return t
}

func (t *transform) stats() string {
	return fmt.Sprintf("transformed %d, passed %d, failed %d, payload bytes %d -> %d",
		t.done.Load(), t.passed.Load(), t.failed.Load(), t.in.Load(), t.out.Load())
}

// udpPayload returns the offset of the UDP payload in an inner IPv4 or IPv6
// packet (no IPv6 extension headers, not a fragment), or -1.
func udpPayload(proto uint8, in []byte) int {
	switch {
	case proto == 4 && len(in) >= 20 && in[0]>>4 == 4 && in[9] == 17 && in[6]&0x3f == 0 && in[7] == 0:
		off := int(in[0]&0xf) * 4
		if off >= 20 && off+8 <= len(in) {
			return off + 8
		}
	case proto == 41 && len(in) >= 48 && in[0]>>4 == 6 && in[6] == 17:
		return 48
	}
	return -1
}

// maxPayload keeps the result within one UMEM frame (4096 bytes minus the
// headers) and within what a decompressor will produce.
const maxPayload = 3000

func (t *transform) handle(p *srv6svc.Packet) srv6svc.Verdict {
	in := p.Inner()
	off := udpPayload(p.InnerProto(), in)
	if off < 0 {
		t.passed.Add(1)
		return srv6svc.Forward
	}
	s := t.pool.Get().(*scratch)
	defer t.pool.Put(s)
	s.buf.Reset()
	payload := in[off:]
	if t.compress {
		s.w.Reset(&s.buf)
		s.w.Write(payload)
		s.w.Close()
	} else {
		s.r.(flate.Resetter).Reset(bytes.NewReader(payload), nil)
		if _, err := io.Copy(&s.buf, io.LimitReader(s.r, maxPayload+1)); err != nil || s.buf.Len() > maxPayload {
			t.failed.Add(1) // not our compressed data: drop, never forward garbage
			return srv6svc.Drop
		}
	}
	s.pkt = append(append(s.pkt[:0], in[:off]...), s.buf.Bytes()...)
	if err := p.SetInner(s.pkt); err != nil {
		t.failed.Add(1)
		return srv6svc.Drop
	}
	t.done.Add(1)
	t.in.Add(uint64(len(payload)))
	t.out.Add(uint64(s.buf.Len()))
	return srv6svc.Forward
}
