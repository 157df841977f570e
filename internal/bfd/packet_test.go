package bfd

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMarshalParse(t *testing.T) {
	for _, p := range []Packet{
		{Version: 1, State: Down, DetectMult: 3, MyDisc: 1, DesiredMinTx: 1000000, RequiredMinRx: 300000},
		{Version: 1, Diag: DiagTimeExpired, State: Up, Poll: true, DetectMult: 5, MyDisc: 0xdeadbeef, YourDisc: 7, DesiredMinTx: 300000, RequiredMinRx: 300000},
		{Version: 1, Diag: DiagAdminDown, State: AdminDown, Final: true, CPI: true, Demand: true, DetectMult: 255, MyDisc: 0xffffffff, YourDisc: 0xffffffff, RequiredMinEchoRx: 50000},
	} {
		got, err := Parse(p.Marshal())
		if err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		if diff := cmp.Diff(p, got); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
}

// The bytes of a packet as RFC 5880 §4.1 lays them out, written by hand
// (not by Marshal).
func TestWireLayout(t *testing.T) {
	want := []byte{
		0x20 | 0x03, // version 1, diag 3
		0xc0 | 0x20, // state Up, Poll
		3, 24,
		0, 0, 0, 0x11, // my disc
		0, 0, 0, 0x22, // your disc
		0, 0x04, 0x93, 0xe0, // 300000 µs
		0, 0x0f, 0x42, 0x40, // 1000000 µs
		0, 0, 0, 0,
	}
	p := Packet{Version: 1, Diag: DiagNeighborDown, State: Up, Poll: true, DetectMult: 3, MyDisc: 0x11, YourDisc: 0x22,
		DesiredMinTx: 300000, RequiredMinRx: 1000000}
	if diff := cmp.Diff(want, p.Marshal()); diff != "" {
		t.Errorf("wire (-want +got):\n%s", diff)
	}
}

func TestParseDrops(t *testing.T) {
	good := func() []byte {
		p := Packet{Version: 1, State: Down, DetectMult: 3, MyDisc: 9, DesiredMinTx: 1e6, RequiredMinRx: 1e6}
		return p.Marshal()
	}
	for _, tc := range []struct {
		name string
		mod  func([]byte) []byte
		want Reason
	}{
		{"short", func(b []byte) []byte { return b[:23] }, ReasonShort},
		{"version 0", func(b []byte) []byte { b[0] &= 0x1f; return b }, ReasonVersion},
		{"version 2", func(b []byte) []byte { b[0] = 2<<5 | b[0]&0x1f; return b }, ReasonVersion},
		{"length below 24", func(b []byte) []byte { b[3] = 23; return b }, ReasonLength},
		{"length beyond payload", func(b []byte) []byte { b[3] = 40; return b }, ReasonLength},
		{"detect mult 0", func(b []byte) []byte { b[2] = 0; return b }, ReasonDetectMult},
		{"multipoint", func(b []byte) []byte { b[1] |= 0x01; return b }, ReasonMultipoint},
		{"my disc 0", func(b []byte) []byte { copy(b[4:8], []byte{0, 0, 0, 0}); return b }, ReasonMyDisc},
		{"auth, 24 bytes", func(b []byte) []byte { b[1] |= 0x04; return b }, ReasonLength},
		{"auth", func(b []byte) []byte { b[1] |= 0x04; b[3] = 26; return append(b, 1, 2) }, ReasonAuth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.mod(good()))
			var d *DropError
			if !errors.As(err, &d) {
				t.Fatalf("Parse: %v, want a drop (%s)", err, tc.want)
			}
			if d.Reason != tc.want {
				t.Errorf("reason %s, want %s", d.Reason, tc.want)
			}
		})
	}
	// Longer than Length (trailing bytes) is fine.
	if _, err := Parse(append(good(), 0, 0)); err != nil {
		t.Errorf("trailing bytes: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	p := Packet{Version: 1, State: Up, DetectMult: 3, MyDisc: 1, YourDisc: 2, DesiredMinTx: 1, RequiredMinRx: 1}
	f.Add(p.Marshal())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			return
		}
		// What Parse accepts re-encodes to its first 24 bytes, length
		// aside.
		out := p.Marshal()
		in := append([]byte(nil), b[:24]...)
		in[3] = 24
		if diff := cmp.Diff(in, out); diff != "" {
			t.Errorf("re-encoding (-in +out):\n%s", diff)
		}
	})
}
