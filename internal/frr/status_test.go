package frr

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The shape of FRR 8.4's show bfd peers json (abridged from bfdd).
func TestParseBFDPeers(t *testing.T) {
	out := []byte(`% a vtysh warning
[{"multihop":false,"peer":"fc00:15::1","local":"fc00:15::5","interface":"eth-ingress","vrf":"default","id":1983911417,"remote-id":77,"passive-mode":false,"status":"up","uptime":3,"diagnostic":"ok","remote-diagnostic":"ok"},
 {"multihop":false,"peer":"fc00:25::2","vrf":"default","id":2238569229,"remote-id":0,"status":"down","downtime":2,"diagnostic":"control detection time expired"},
 {"multihop":false,"peer":"fc00:26::2","vrf":"default","id":3,"status":"shutdown"}]`)
	got, err := parseBFDPeers(out)
	if err != nil {
		t.Fatal(err)
	}
	want := map[netip.Addr]string{
		netip.MustParseAddr("fc00:15::1"): "up",
		netip.MustParseAddr("fc00:25::2"): "down",
		netip.MustParseAddr("fc00:26::2"): "admin-down",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := parseBFDPeers([]byte("not json")); err == nil {
		t.Error("garbage parsed")
	}
}
