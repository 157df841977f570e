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
