package srunaware

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestProxyHelpers(t *testing.T) {
	sid := netip.MustParsePrefix("fc00:2::ad/128")
	tests := []struct {
		name      string
		params    []string
		canonical string
		wantErr   string
	}{
		{"canonical already", []string{"inner", "ipv6", "nh6", "fc00:27::7", "oif", "sf0", "iif", "sf0"},
			"proxy fc00:2::ad/128 End.AD inner ipv6 nh6 fc00:27::7 oif sf0 iif sf0", ""},
		{"reordered", []string{"iif", "sf0", "flow", "oif", "sf0", "nh6", "fc00:27::7", "inner", "ipv6"},
			"proxy fc00:2::ad/128 End.AD inner ipv6 nh6 fc00:27::7 oif sf0 iif sf0 flow", ""},
		{"srconf form", []string{"ip", "fc00:27::7", "sf0", "sf1"},
			"proxy fc00:2::ad/128 End.AD ip fc00:27::7 sf0 sf1", "inner"},
		{"unparsable kept as given", []string{"bogus", "1"}, "proxy fc00:2::ad/128 End.AD bogus 1", "unknown parameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Proxy{SID: sid, Behavior: "End.AD", Params: tt.params}
			if got := (Kind{}).Canonical(p.Service()); got != tt.canonical {
				t.Errorf("Canonical = %q, want %q", got, tt.canonical)
			}
			spec, err := SpecOf(p.Service())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("SpecOf error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.canonical, Of(spec).String()); diff != "" {
				t.Errorf("Of(spec) (-want +got):\n%s", diff)
			}
		})
	}
}
