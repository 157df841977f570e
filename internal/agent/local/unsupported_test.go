package local

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/dataplane"
	"github.com/segchain/segchain/internal/nodestate"
)

func TestUnsupported(t *testing.T) {
	noVRF := dataplane.Features{
		VRF:    dataplane.Feature{Name: "vrf", Reason: "cannot create a vrf device"},
		EndDT4: dataplane.Feature{Name: "End.DT4", Reason: "needs a vrf device"},
		HMAC:   dataplane.Feature{Name: "seg6 hmac", Supported: true},
	}
	want := &nodestate.Node{Routes: []nodestate.Route{
		{Dst: netip.MustParsePrefix("fc00:3::1/128"), Owner: "service dt4", Seg6Local: &nodestate.Seg6Local{Action: "End.DT4", VRFTable: 10}},
		{Dst: netip.MustParsePrefix("fc00:3::2/128"), Owner: "service e", Seg6Local: &nodestate.Seg6Local{Action: "End"}},
		{Dst: netip.MustParsePrefix("fc00:99::/64"), Dev: "eth0"},
	}, HMACKeys: []nodestate.HMACKey{{ID: 1}}}
	got := unsupported(noVRF, "nfv", want)
	if len(got) != 1 || !strings.HasPrefix(got[0], "service dt4: End.DT4 at fc00:3::1/128: needs VRF devices, which the kernel of node nfv lacks") {
		t.Errorf("unsupported = %q", got)
	}
	psp := &nodestate.Node{Routes: []nodestate.Route{{Dst: netip.MustParsePrefix("fc00:3::3/128"), Owner: "service p",
		Seg6Local: &nodestate.Seg6Local{Action: "End", Flavors: []string{"psp"}}}}}
	noVRF.FlavorPSP = dataplane.Feature{Name: "flavor psp", Reason: "kernel rejected fc00:ffff::3/128 encap seg6local action End flavors psp: invalid argument"}
	if got := unsupported(noVRF, "nfv", psp); len(got) != 1 || strings.Contains(got[0], "fc00:ffff") || !strings.Contains(got[0], "the kernel said: invalid argument") {
		t.Errorf("probe route in the message: %q", got)
	}
	noVRF.HMAC.Supported = false
	if got := unsupported(noVRF, "nfv", want); len(got) != 2 || !strings.HasPrefix(got[1], "HMAC keys") {
		t.Errorf("without HMAC: %q", got)
	}
}

// A desired state that uses no probed feature needs no probe: whatever
// the kernel, nothing of it is unsupported.
func TestProbeNeeded(t *testing.T) {
	none := dataplane.Features{} // nothing supported
	tests := []struct {
		name string
		want *nodestate.Node
		need bool
	}{
		{"static routes", &nodestate.Node{Routes: []nodestate.Route{{Dst: netip.MustParsePrefix("fc00:9::/64"), Dev: "eth0"}}}, false},
		{"End, End.DX6, encap", &nodestate.Node{Routes: []nodestate.Route{
			{Dst: netip.MustParsePrefix("fc00:2::1/128"), Seg6Local: &nodestate.Seg6Local{Action: "End"}},
			{Dst: netip.MustParsePrefix("fc00:2::2/128"), Seg6Local: &nodestate.Seg6Local{Action: "End.DX6", Nh6: netip.MustParseAddr("fc02::1")}},
			{Dst: netip.MustParsePrefix("fc02:d::/64"), Table: 100, Seg6: &nodestate.Seg6Encap{Mode: "encap", Segs: []netip.Addr{netip.MustParseAddr("fc00:2::1")}}},
		}}, false},
		{"count", &nodestate.Node{Routes: []nodestate.Route{{Dst: netip.MustParsePrefix("fc00:2::1/128"), Seg6Local: &nodestate.Seg6Local{Action: "End", Count: true}}}}, true},
		{"End.DT4", &nodestate.Node{Routes: []nodestate.Route{{Dst: netip.MustParsePrefix("fc00:2::1/128"), Seg6Local: &nodestate.Seg6Local{Action: "End.DT4", VRFTable: 10}}}}, true},
		{"l2encap", &nodestate.Node{Routes: []nodestate.Route{{Dst: netip.MustParsePrefix("fc02:d::/64"), Seg6: &nodestate.Seg6Encap{Mode: "l2encap"}}}}, true},
		{"bad flavor", &nodestate.Node{Routes: []nodestate.Route{{Dst: netip.MustParsePrefix("fc00:2::1/128"), Seg6Local: &nodestate.Seg6Local{Action: "End.DX6", Flavors: []string{"psp"}}}}}, true},
		{"hmac keys", &nodestate.Node{HMACKeys: []nodestate.HMACKey{{ID: 1}}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ProbeNeeded(tt.want); got != tt.need {
				t.Fatalf("ProbeNeeded = %v, want %v", got, tt.need)
			}
			if !tt.need {
				if got := unsupported(none, "n", tt.want); got != nil {
					t.Fatalf("unsupported without any feature = %q, want nothing", got)
				}
			}
		})
	}
}
