package main

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/segchain/segchain/internal/plan"
)

func TestStatusUSIDForms(t *testing.T) {
	a := netip.MustParseAddr
	ch := plan.Chain{Encap: "encap", Segments: []netip.Addr{a("fc00:2::b324:0"), a("fcbb:bb00:3c7:471::")}, USIDBlock: netip.MustParsePrefix("fcbb:bb00::/32")}
	if got := usidForm(ch, a("fcbb:bb00:3c7::")); got != " (uSID 03c7)" {
		t.Errorf("uSID hop: %q", got)
	}
	if got := usidForm(ch, a("fc00:2::b324:0")); got != "" {
		t.Errorf("full hop: %q", got)
	}
	if got := usidForm(plan.Chain{}, a("fcbb:bb00:3c7::")); got != "" {
		t.Errorf("uncompressed chain: %q", got)
	}
	// F4816 (issue 31): the uSID is the 16 bits after a 48-bit block.
	ch48 := plan.Chain{Encap: "encap.red", Segments: []netip.Addr{a("2001:db8:aa:3c7:471::")}, USIDBlock: netip.MustParsePrefix("2001:db8:aa::/48")}
	if got := usidForm(ch48, a("2001:db8:aa:3c7::")); got != " (uSID 03c7)" {
		t.Errorf("F4816 uSID hop: %q", got)
	}
	var b bytes.Buffer
	printPushed(&b, ch)
	if want := "  pushed as encap fc00:2::b324:0,fcbb:bb00:3c7:471::\n"; b.String() != want {
		t.Errorf("pushed: %q, want %q", b.String(), want)
	}
}
