package firewall

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/service"
)

// TestPlanRoundTrip: a block planned into a service reads back as the
// same instance, and its canonical text ignores spelling.
func TestPlanRoundTrip(t *testing.T) {
	in := service.Input{Name: "fw1", Prefix: netip.MustParsePrefix("fc00:2::f1:0/112"), ArgsBits: 16, Dir: t.TempDir(),
		Block: &Config{Policy: "drop", Rules: []string{"-p tcp -m tcp --dport 22 -j DROP"}}}
	svc, err := Kind{}.Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	if svc.Kind != Name || svc.SID != in.Prefix {
		t.Fatalf("service %+v", svc)
	}
	f, err := SpecOf(svc)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"firewall fc00:2::f1:0/112 End.AN.FW args_bits 16 policy drop args 0=go-next,1=drop,2=skip-next,3=go-last rules 1",
		"  1: -p tcp --dport 22 -j DROP",
	}
	if diff := cmp.Diff(want, Kind{}.Lines(svc)); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	spelled := f
	spelled.Rules = []string{"-p tcp -m tcp --dport 22 -j DROP"}
	spelled.Args = nil // the default table, implicit
	if a, b := (Kind{}).Canonical(svc), (Kind{}).Canonical(spelled.Service()); a != b {
		t.Errorf("equal instances differ:\n%s\n%s", a, b)
	}
	spelled.Policy = "accept"
	if (Kind{}).Canonical(svc) == (Kind{}).Canonical(spelled.Service()) {
		t.Error("a policy change is no difference")
	}
	in.Block = &Config{Rules: []string{"-j NOPE"}}
	if _, err := (Kind{}).Plan(in); err == nil || !strings.Contains(err.Error(), "firewall.rules[0]") {
		t.Errorf("bad rule: %v", err)
	}
}
