package main

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/segchain/segchain/internal/plan"
)

func TestStatusUSIDForms(t *testing.T) {
	a := netip.MustParseAddr
	ch := plan.Chain{Encap: "encap", Segments: []netip.Addr{a("fc00:2::b324:0"), a("fcbb:bb00:3c7:471::")}}
	if got := usidForm(ch, a("fcbb:bb00:3c7::")); got != " (uSID 03c7)" {
		t.Errorf("uSID hop: %q", got)
	}
	if got := usidForm(ch, a("fc00:2::b324:0")); got != "" {
		t.Errorf("full hop: %q", got)
	}
	if got := usidForm(plan.Chain{}, a("fcbb:bb00:3c7::")); got != "" {
		t.Errorf("uncompressed chain: %q", got)
	}
	var b bytes.Buffer
	printPushed(&b, ch)
	if want := "  pushed as encap fc00:2::b324:0,fcbb:bb00:3c7:471::\n"; b.String() != want {
		t.Errorf("pushed: %q, want %q", b.String(), want)
	}
}
