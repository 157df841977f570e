package csid

import (
	"errors"
	"net/netip"
	"testing"
)

var blk = netip.MustParsePrefix("fcbb:bb00::/32")

func TestPackDecode(t *testing.T) {
	f := F3216(blk)
	full := netip.MustParseAddr("fc00:2::1234")
	hops := []Hop{{USID: true, Value: 0x201}, {USID: true, Value: 0x301}, full3(full),
		{USID: true, Value: 1}, {USID: true, Value: 2}, {USID: true, Value: 3}, {USID: true, Value: 4},
		{USID: true, Value: 5}, {USID: true, Value: 6}, {USID: true, Value: 7, Last: true}}
	got := f.Pack(hops)
	want := []string{"fcbb:bb00:201:301::", "fc00:2::1234", "fcbb:bb00:1:2:3:4:5:6", "fcbb:bb00:7::"}
	if len(got) != len(want) {
		t.Fatalf("Pack = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != netip.MustParseAddr(want[i]) {
			t.Errorf("entry %d = %s, want %s", i, got[i], want[i])
		}
	}
	c, err := f.Decode(got[0])
	if err != nil || c.Active != 0x201 || len(c.Next) != 1 || c.Next[0] != 0x301 {
		t.Errorf("Decode(%s) = %v, %v", got[0], c, err)
	}
	if s, ok := f.Shift(got[0]); !ok || s != netip.MustParseAddr("fcbb:bb00:301::") {
		t.Errorf("Shift = %s %v", s, ok)
	}
	if _, ok := f.Shift(netip.MustParseAddr("fcbb:bb00:301::")); ok {
		t.Error("Shift of a consumed container succeeded")
	}
}

func full3(a netip.Addr) Hop { return Hop{Full: a} }

func TestDecodeErrors(t *testing.T) {
	f := F3216(blk)
	for _, tc := range []struct {
		a    string
		want error
	}{
		{"fcbb:bb00:1:0:5::", ErrPadding},
		{"fcbb:bb00:0:1::", ErrEmpty},
		{"fc00:2::1", ErrNotInBlock},
	} {
		if _, err := f.Decode(netip.MustParseAddr(tc.a)); !errors.Is(err, tc.want) {
			t.Errorf("Decode(%s) = %v, want %v", tc.a, err, tc.want)
		}
	}
}

func TestHeaderBytes(t *testing.T) {
	// A 5-function chain + egress: 6 full SIDs cost 40+8+6*16; as uSIDs
	// one container in the DA and no SRH.
	if got := HeaderBytes(6, false); got != 144 {
		t.Errorf("full = %d", got)
	}
	if got := HeaderBytes(1, true); got != 40 {
		t.Errorf("f3216 = %d", got)
	}
	if got := HeaderBytes(2, true); got != 64 {
		t.Errorf("two containers = %d", got)
	}
}

func TestValidate(t *testing.T) {
	if err := (Format{Block: netip.MustParsePrefix("fcbb::/30"), NFLen: 16}).Validate(); err == nil {
		t.Error("lblen 30 accepted")
	}
	if err := F3216(blk).Validate(); err != nil {
		t.Error(err)
	}
}
