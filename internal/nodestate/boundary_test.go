package nodestate

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// TestBoundaryFitsCountsSFs: the prefix map holds locators, external
// SIDs, node and SF addresses together; one past its size is refused.
func TestBoundaryFitsCountsSFs(t *testing.T) {
	b := Boundary{Locators: []netip.Prefix{netip.MustParsePrefix("fc00:1::/64")},
		Nodes: []netip.Addr{netip.MustParseAddr("fc00:12::1")}}
	for i := 0; len(b.Locators)+len(b.Nodes)+len(b.SFs) < BoundaryPrefixesMax; i++ {
		b.SFs = append(b.SFs, netip.MustParseAddr(fmt.Sprintf("fd00:%x::7", i)))
	}
	if err := b.Fits(); err != nil {
		t.Fatalf("%d prefixes: %v", BoundaryPrefixesMax, err)
	}
	b.SFs = append(b.SFs, netip.MustParseAddr("fd01::7"))
	err := b.Fits()
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("(1, 0, 1, %d)", len(b.SFs))) {
		t.Errorf("one SF address past the map: %v, want a refusal counting the SF addresses", err)
	}
	if s := b.String(); !strings.Contains(s, " sfs fd00:0::7,") && !strings.Contains(s, " sfs fd00::7,") {
		t.Errorf("String() does not list the SF addresses: %.200s", s)
	}
}
