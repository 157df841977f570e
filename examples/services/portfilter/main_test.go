package main

import (
	"encoding/binary"
	"go/parser"
	"go/token"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segchain/segchain/pkg/srv6svc/srv6svctest"
)

// TestFilter runs the handler on built frames, no root: UDP/7 dropped,
// TCP/80 tagged, anything else forwarded untouched but for End.
func TestFilter(t *testing.T) {
	src, sid := netip.MustParseAddr("fc00:1::1"), netip.MustParseAddr("fc00:5::100")
	segs := []netip.Addr{netip.MustParseAddr("fc00:9::99"), netip.MustParseAddr("fc00:9::1"), sid}
	h := srv6svctest.New(netip.PrefixFrom(sid, 128))
	rs := h.Run(filter(0x80),
		srv6svctest.Frame(src, segs, 2, srv6svctest.UDP4("10.0.0.1", "10.0.0.2", 1000, 7, []byte("echo"))),
		srv6svctest.Frame(src, segs, 2, srv6svctest.UDP6("2001:db8::1", "2001:db8::2", 1000, 7, []byte("echo"))),
		srv6svctest.Frame(src, segs, 2, srv6svctest.TCP4("10.0.0.1", "10.0.0.2", 1000, 80, []byte("GET /"))),
		srv6svctest.Frame(src, segs, 2, srv6svctest.TCP6("2001:db8::1", "2001:db8::2", 1000, 80, []byte("GET /"))),
		srv6svctest.Frame(src, segs, 2, srv6svctest.UDP4("10.0.0.1", "10.0.0.2", 1000, 53, []byte("dns"))),
	)
	for i, want := range []struct {
		sent bool
		tag  uint16
	}{{false, 0}, {false, 0}, {true, 0x80}, {true, 0x80}, {true, 0}} {
		r := rs[i]
		if r.Sent != want.sent {
			t.Errorf("packet %d: sent %v (%s), want %v", i, r.Sent, r.Dropped, want.sent)
			continue
		}
		if r.Sent {
			if tag := binary.BigEndian.Uint16(r.Out[54+6:]); tag != want.tag {
				t.Errorf("packet %d: tag %#x, want %#x", i, tag, want.tag)
			}
			if !srv6svctest.Checksum(r.Out[54+56:]) {
				t.Errorf("packet %d: inner checksum broken", i)
			}
		}
	}
}

// TestPublicAPIOnly: the service uses no segchain internals (it stands for
// one written from the docs alone).
func TestPublicAPIOnly(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range af.Imports {
			if p := strings.Trim(im.Path.Value, `"`); strings.Contains(p, "/internal/") {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
}
