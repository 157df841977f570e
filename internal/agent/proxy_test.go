package agent

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/nodestate"
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
			p := nodestate.Proxy{SID: sid, Behavior: "End.AD", Params: tt.params}
			if got := CanonicalProxy(p); got != tt.canonical {
				t.Errorf("CanonicalProxy = %q, want %q", got, tt.canonical)
			}
			specs, err := ProxySpecs([]nodestate.Proxy{p})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ProxySpecs error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.canonical, ProxyOf(specs[0]).String()); diff != "" {
				t.Errorf("ProxyOf(spec) (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProxiesOp(t *testing.T) {
	a := nodestate.Proxy{SID: netip.MustParsePrefix("fc00:2::a/128"), Behavior: "End.AM", Params: []string{"nh6", "fc00::7", "oif", "x", "iif", "x"}}
	b := nodestate.Proxy{SID: netip.MustParsePrefix("fc00:2::b/128"), Behavior: "End.AM", Params: []string{"nh6", "fc00::8", "oif", "y", "iif", "y"}}
	op := Op{Kind: KindProxies, Action: ActSet, Proxies: []nodestate.Proxy{a, b}, OldProxies: []nodestate.Proxy{a}}
	want := "~ proxies: 1 -> 2\n    + " + b.String()
	if got := op.String(); got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	inv := op.Inverse()
	if diff := cmp.Diff([]nodestate.Proxy{a}, inv.Proxies, cmp.Comparer(func(x, y netip.Prefix) bool { return x == y })); diff != "" {
		t.Errorf("inverse proxies (-want +got):\n%s", diff)
	}
	if got := inv.Inverse().String(); got != op.String() {
		t.Errorf("inverse of inverse = %q, want %q", got, op.String())
	}
	// The op is plain data: it survives the wire.
	raw, err := MarshalOps([]Op{op})
	if err != nil {
		t.Fatal(err)
	}
	var back []Op
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if got := back[0].String(); got != op.String() {
		t.Errorf("after JSON: %q, want %q", got, op.String())
	}
}
