package srv6svc

import (
	"net/netip"
	"testing"
)

func TestAdvanceContainer(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		shifted  bool
	}{
		{"fcbb:bb00:2d0:3c7:4b6::", "fcbb:bb00:3c7:4b6::", true},
		{"fcbb:bb00:4b6::", "fcbb:bb00:4b6::", false},
		{"fcbb:bb00:1:2:3:4:5:6", "fcbb:bb00:2:3:4:5:6:0", true},
	} {
		got, ok := AdvanceContainer(netip.MustParseAddr(tc.in), F3216)
		if got != netip.MustParseAddr(tc.want) || ok != tc.shifted {
			t.Errorf("AdvanceContainer(%s) = %s %v, want %s %v", tc.in, got, ok, tc.want, tc.shifted)
		}
	}
	if _, ok := AdvanceContainer(netip.MustParseAddr("fcbb:bb00:1:2::"), CSIDFormat{LBLen: 30, NFLen: 16}); ok {
		t.Error("lblen 30 accepted")
	}
}

// TestAdvanceContainerF4816: a 48-bit block stays, the five uSIDs after it
// move left by 16 bits (RFC 9800's End with NEXT-C-SID, LBL 48).
func TestAdvanceContainerF4816(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		shifted  bool
	}{
		{"2001:db8:aa:2d0:3c7:4b6::", "2001:db8:aa:3c7:4b6::", true},
		{"2001:db8:aa:4b6::", "2001:db8:aa:4b6::", false},
		{"2001:db8:aa:1:2:3:4:5", "2001:db8:aa:2:3:4:5:0", true},
	} {
		got, ok := AdvanceContainer(netip.MustParseAddr(tc.in), F4816)
		if got != netip.MustParseAddr(tc.want) || ok != tc.shifted {
			t.Errorf("AdvanceContainer(%s) = %s %v, want %s %v", tc.in, got, ok, tc.want, tc.shifted)
		}
	}
	if !CSIDPaddingOK(netip.MustParseAddr("2001:db8:aa:2d0:3c7::"), F4816) || CSIDPaddingOK(netip.MustParseAddr("2001:db8:aa:2d0:0:4b6::"), F4816) {
		t.Error("F4816 padding check")
	}
	for in, want := range map[string]CSIDFormat{"f3216": F3216, "F4816": F4816, "48/16": F4816, "56/16": {56, 16}} {
		if f, err := ParseCSIDFormat(in); err != nil || f != want {
			t.Errorf("ParseCSIDFormat(%q) = %v, %v; want %v", in, f, err, want)
		}
	}
}
