package service_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/service"
	"github.com/segchain/segchain/internal/service/firewall"
	"github.com/segchain/segchain/internal/service/kinds"
	"github.com/segchain/segchain/internal/service/srunaware"
)

func TestRegistry(t *testing.T) {
	if _, err := service.NewRegistry(firewall.Kind{}, firewall.Kind{}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate kind: %v", err)
	}
	r := kinds.Registry()
	// The two first kinds keep the order plan output and diffs had
	// before the seam; later kinds come after them.
	if got := strings.Join(r.Names(), ","); !strings.HasPrefix(got, "sr-unaware,firewall") {
		t.Errorf("names %s, want sr-unaware,firewall first", got)
	}
	if k, ok := r.Lookup(firewall.Name); !ok || k.Plural() != "firewalls" {
		t.Errorf("lookup firewall: %v %v", k, ok)
	}
	if _, ok := r.Lookup("native"); ok {
		t.Error("native is not a service kind")
	}
	sid := netip.MustParsePrefix("fc00:2::a/128")
	p := srunaware.Proxy{SID: sid, Behavior: "End.AM", Params: []string{"iif", "x", "oif", "x", "nh6", "fc00::7"}}
	q := srunaware.Proxy{SID: sid, Behavior: "End.AM", Params: []string{"nh6", "fc00::7", "oif", "x", "iif", "x"}}
	if !r.Same(srunaware.Services(p), srunaware.Services(q)) {
		t.Error("equal proxies spelled differently are not the same")
	}
}
