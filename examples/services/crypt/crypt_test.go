package crypt

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segchain/segchain/pkg/srv6svc/srv6svctest"
)

var (
	encSID, decSID = netip.MustParseAddr("fc00:2::e"), netip.MustParseAddr("fc00:3::d")
	segs           = []netip.Addr{netip.MustParseAddr("fc00:4::1"), decSID, encSID}
	src            = netip.MustParseAddr("fc00:1::1")
)

func keyDir(t *testing.T, ids ...int) string {
	t.Helper()
	dir := t.TempDir()
	for _, id := range ids {
		writeKey(t, dir, id)
	}
	return dir
}

func writeKey(t *testing.T, dir string, id int) {
	t.Helper()
	k := strings.Repeat(string(rune('a'+id%6)), 64)
	if err := os.WriteFile(filepath.Join(dir, strings.TrimSpace(string(rune('0'+id)))+".key"), []byte(k+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

type pair struct {
	s        *Sealer
	o        *Opener
	enc, dec *srv6svctest.Harness
}

func newPair(t *testing.T, dir string) *pair {
	k1, err := LoadKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := LoadKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &pair{NewSealer(k1), NewOpener(k2), srv6svctest.New(netip.PrefixFrom(encSID, 128)), srv6svctest.New(netip.PrefixFrom(decSID, 128))}
}

func (p *pair) seal(t *testing.T, inner []byte) []byte {
	t.Helper()
	r := p.enc.Run(p.s.Handle, srv6svctest.Frame(src, segs, 2, inner))[0]
	if !r.Sent {
		t.Fatalf("seal dropped: %s (%s)", r.Dropped, &p.s.C)
	}
	return r.Out
}

func (p *pair) open(frame []byte) srv6svctest.Result { return p.dec.Run(p.o.Handle, frame)[0] }

func TestRoundTrip(t *testing.T) {
	p := newPair(t, keyDir(t, 1))
	for _, inner := range [][]byte{
		srv6svctest.UDP4("10.0.0.1", "10.0.0.2", 1, 53, []byte("secret query")),
		srv6svctest.TCP6("2001:db8::1", "2001:db8::2", 1, 80, bytes.Repeat([]byte("x"), 1400)),
	} {
		sealed := p.seal(t, inner)
		s := sealed[54:]
		srhLen := (int(s[1]) + 1) * 8
		if s[0] != SealedNH || bytes.Contains(sealed, inner[20:]) || len(sealed)-54-srhLen != len(inner)+HeaderLen+TagLen {
			t.Fatalf("sealed frame: NH %d, %d bytes", s[0], len(sealed))
		}
		wantNH := byte(41)
		if inner[0]>>4 == 4 {
			wantNH = 4
		}
		r := p.open(sealed)
		if !r.Sent || !bytes.Equal(r.Out[54+srhLen:], inner) || r.Out[54] != wantNH {
			t.Errorf("opened: sent %v (%s), inner restored %v", r.Sent, r.Dropped, r.Sent && bytes.Equal(r.Out[54+srhLen:], inner))
		}
	}
	if p.o.C.Opened.Load() != 2 {
		t.Errorf("counters %s", &p.o.C)
	}
}

// TestFailures: each failure is dropped and counted under its reason.
func TestFailures(t *testing.T) {
	dir := keyDir(t, 1)
	p := newPair(t, dir)
	inner := srv6svctest.UDP4("10.0.0.1", "10.0.0.2", 1, 53, []byte("payload"))
	sealed := p.seal(t, inner)
	srhEnd := 54 + (int(sealed[55])+1)*8
	mut := func(f func(b []byte)) []byte { b := append([]byte(nil), sealed...); f(b); return b }
	cases := []struct {
		name  string
		frame []byte
		ctr   *atomicU
	}{
		{"ciphertext bit flipped", mut(func(b []byte) { b[srhEnd+HeaderLen+3] ^= 1 }), &atomicU{&p.o.C.DropAuth}},
		{"tag bit flipped", mut(func(b []byte) { b[len(b)-1] ^= 0x80 }), &atomicU{&p.o.C.DropAuth}},
		{"sequence changed", mut(func(b []byte) { b[srhEnd+11]++ }), &atomicU{&p.o.C.DropAuth}},
		{"outer source changed", mut(func(b []byte) { b[14+8+15] ^= 1 }), &atomicU{&p.o.C.DropAuth}},
		{"unknown key id", mut(func(b []byte) { binary.BigEndian.PutUint16(b[srhEnd+2:], 9) }), &atomicU{&p.o.C.DropUnknownKey}},
		{"bad version", mut(func(b []byte) { b[srhEnd] = 2 }), &atomicU{&p.o.C.DropBadHeader}},
		{"truncated", mut(func(b []byte) {})[:srhEnd+HeaderLen+TagLen-1], &atomicU{&p.o.C.DropBadHeader}},
		{"not sealed", srv6svctest.Frame(src, segs, 1, inner), &atomicU{&p.o.C.DropNotSealed}},
	}
	for _, c := range cases {
		if c.name == "truncated" {
			binary.BigEndian.PutUint16(c.frame[18:], uint16(len(c.frame)-54))
		}
		before := c.ctr.Load()
		if r := p.open(c.frame); r.Sent || r.Dropped != "verdict" || c.ctr.Load() != before+1 {
			t.Errorf("%s: sent %v dropped %q, counter %d→%d (%s)", c.name, r.Sent, r.Dropped, before, c.ctr.Load(), &p.o.C)
		}
	}
	// Replay: the authentic packet opens once.
	if r := p.open(sealed); !r.Sent {
		t.Fatalf("authentic packet: %s (%s)", r.Dropped, &p.o.C)
	}
	if r := p.open(sealed); r.Sent || p.o.C.DropReplay.Load() != 1 {
		t.Errorf("replayed: sent %v (%s)", r.Sent, &p.o.C)
	}
	// Too old: a packet sealed before Window later ones.
	old := p.seal(t, inner)
	for i := 0; i < Window; i++ {
		p.open(p.seal(t, inner))
	}
	if r := p.open(old); r.Sent || p.o.C.DropTooOld.Load() != 1 {
		t.Errorf("too old: sent %v (%s)", r.Sent, &p.o.C)
	}
	// Out of order within the window is fine.
	a, b := p.seal(t, inner), p.seal(t, inner)
	if !p.open(b).Sent || !p.open(a).Sent {
		t.Errorf("reordered within the window dropped (%s)", &p.o.C)
	}
}

// TestRotation: with key 2 added and reloaded, the sealer uses it; the
// opener accepts both until key 1's file goes.
func TestRotation(t *testing.T) {
	dir := keyDir(t, 1)
	p := newPair(t, dir)
	inner := srv6svctest.UDP6("2001:db8::1", "2001:db8::2", 1, 53, []byte("q"))
	old := p.seal(t, inner)
	writeKey(t, dir, 2)
	if err := p.o.Keys.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := p.s.Keys.Reload(); err != nil {
		t.Fatal(err)
	}
	cur := p.seal(t, inner)
	srhEnd := 54 + (int(cur[55])+1)*8
	if id := binary.BigEndian.Uint16(cur[srhEnd+2:]); id != 2 {
		t.Errorf("sealed with key %d after rotation, want 2", id)
	}
	if !p.open(old).Sent || !p.open(cur).Sent {
		t.Errorf("both keys must open (%s)", &p.o.C)
	}
	os.Remove(filepath.Join(dir, "1.key"))
	if err := p.o.Keys.Reload(); err != nil {
		t.Fatal(err)
	}
	if p.open(p.seal(t, inner)); p.o.C.Opened.Load() != 3 {
		t.Errorf("key 2 after key 1 went: %s", &p.o.C)
	}
	stale := append([]byte(nil), old...)
	if r := p.open(stale); r.Sent || p.o.C.DropUnknownKey.Load() != 1 {
		t.Errorf("key 1 after it went: %s", &p.o.C)
	}
	// A bad key file is refused; the ring in use stays.
	os.WriteFile(filepath.Join(dir, "3.key"), []byte("short"), 0o600)
	if err := p.s.Keys.Reload(); err == nil || !strings.Contains(err.Error(), "3.key") {
		t.Errorf("bad key file: %v", err)
	}
	if r := p.enc.Run(p.s.Handle, srv6svctest.Frame(src, segs, 2, inner))[0]; !r.Sent {
		t.Error("sealer stopped after a bad reload")
	}
}

type atomicU struct{ p interface{ Load() uint64 } }

func (a *atomicU) Load() uint64 { return a.p.Load() }
