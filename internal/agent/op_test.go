package agent

import (
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/service/srunaware"
)

func TestProxiesOp(t *testing.T) {
	a := srunaware.Proxy{SID: netip.MustParsePrefix("fc00:2::a/128"), Behavior: "End.AM", Params: []string{"nh6", "fc00::7", "oif", "x", "iif", "x"}}
	b := srunaware.Proxy{SID: netip.MustParsePrefix("fc00:2::b/128"), Behavior: "End.AM", Params: []string{"nh6", "fc00::8", "oif", "y", "iif", "y"}}
	op := Op{Kind: KindServices, Action: ActSet, Service: srunaware.Name, Services: []nodestate.Service{a.Service(), b.Service()}, OldServices: []nodestate.Service{a.Service()}}
	want := "~ proxies: 1 -> 2\n    + " + b.String()
	if got := op.String(); got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	inv := op.Inverse()
	if diff := cmp.Diff([]nodestate.Service{a.Service()}, inv.Services, cmp.Comparer(func(x, y netip.Prefix) bool { return x == y })); diff != "" {
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
