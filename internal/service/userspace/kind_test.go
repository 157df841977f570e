package userspace

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/service"
)

func TestValidateAndPlan(t *testing.T) {
	var k Kind
	bad := k.Validate(service.Input{Name: "x", Block: &Config{OnFailure: "retry", Wait: "soon", Name: strings.Repeat("n", 40)}})
	var paths []string
	for _, e := range bad {
		paths = append(paths, e.Path)
	}
	if got := strings.Join(paths, ","); got != "userspace.name,userspace.on_failure,userspace.wait" {
		t.Errorf("errors at %s (%v)", got, bad)
	}
	pfx := netip.MustParsePrefix("fc00:2::300:0/112")
	s, err := k.Plan(service.Input{Name: "ids", Prefix: pfx, Block: &Config{OnFailure: "bypass", ASM: true, Wait: "2s"}})
	if err != nil {
		t.Fatal(err)
	}
	sp, err := SpecOf(s)
	if err != nil || s.SID != pfx || sp.Name != "ids" || sp.OnFailure != "bypass" || !sp.ASM || sp.WaitMS != 2000 {
		t.Errorf("planned %+v %+v %v", s, sp, err)
	}
	if got := k.Lines(s)[0]; got != "userspace fc00:2::300:0/112 End.ASM name ids on-failure bypass" {
		t.Errorf("Lines: %q", got)
	}
	// The wait is apply's, not state: an observed binding compares equal.
	obs := s
	obs.Spec = []byte(`{"name":"ids","on_failure":"bypass","asm":true}`)
	if k.Canonical(obs) != k.Canonical(s) {
		t.Errorf("canonical differs: %q vs %q", k.Canonical(obs), k.Canonical(s))
	}
	if k.Behavior(service.Input{}) != BehaviorService {
		t.Error("default behaviour")
	}
}
