package firewall

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/fwrule"
)

// The rule-set edits of `segchain fw`: positions as fw list numbers them,
// errors before anything changes.
func TestEditRules(t *testing.T) {
	rules := func(in Instance) []string {
		var out []string
		for _, r := range in.Rules {
			out = append(out, r.String())
		}
		return out
	}
	var in Instance
	for _, step := range []struct {
		do      func() error
		want    []string
		wantErr string
	}{
		{func() error { return in.AppendRule(strings.Fields("-p tcp -j DROP")) }, []string{"-p tcp -j DROP"}, ""},
		{func() error { return in.AppendRule(nil) }, nil, "no rule given"},
		{func() error { return in.InsertRule(1, strings.Fields("-p udp -j ACCEPT")) }, []string{"-p udp -j ACCEPT", "-p tcp -j DROP"}, ""},
		{func() error { return in.InsertRule(3, strings.Fields("-j DROP")) }, []string{"-p udp -j ACCEPT", "-p tcp -j DROP", "-j DROP"}, ""},
		{func() error { return in.InsertRule(5, strings.Fields("-j DROP")) }, nil, "position 5: the instance has 3 rules"},
		{func() error { return in.DeleteRule(2) }, []string{"-p udp -j ACCEPT", "-j DROP"}, ""},
		{func() error { return in.DeleteRule(3) }, nil, "position 3: the instance has 2 rules"},
	} {
		before := rules(in)
		err := step.do()
		if step.wantErr != "" {
			if err == nil || err.Error() != step.wantErr {
				t.Fatalf("err = %v, want %q", err, step.wantErr)
			}
			if diff := cmp.Diff(before, rules(in)); diff != "" {
				t.Fatalf("a refused edit changed the rules (-before +after):\n%s", diff)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(step.want, rules(in)); diff != "" {
			t.Fatalf("rules (-want +got):\n%s", diff)
		}
	}
}

// SetArg starts from the default table, keeping only the values ArgsBits
// can carry; "none" removes a value.
func TestSetArg(t *testing.T) {
	in := Instance{ArgsBits: 1}
	if err := in.SetArg(1, "go-last"); err != nil {
		t.Fatal(err)
	}
	if err := in.SetArg(0, "none"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[uint32]fwrule.TargetKind{1: fwrule.GoLast}, in.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if err := in.SetArg(1, "sideways"); err == nil {
		t.Error("SetArg(1, sideways) = nil, want an error")
	}
}
