package client

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/segchain/segchain/internal/nodestate"
)

// The feature probe is sent the routes it judges (seg6, seg6local) and
// the HMAC keys, not the static routes.
func TestProbedPart(t *testing.T) {
	p := netip.MustParsePrefix
	want := &nodestate.Node{Name: "n", HMACKeys: []nodestate.HMACKey{{ID: 1}},
		Sysctls: []nodestate.Sysctl{{Key: "net.ipv6.conf.all.forwarding", Value: "1"}},
		Routes: []nodestate.Route{
			{Dst: p("fc00:9::/64"), Dev: "e0"},
			{Dst: p("fc00:2::1/128"), Seg6Local: &nodestate.Seg6Local{Action: "End", Count: true}, Owner: "service s1"},
			{Dst: p("fc02:d::/64"), Table: 100, Seg6: &nodestate.Seg6Encap{Mode: "encap"}, Owner: "chain c0"},
		}}
	got := probed(want)
	wantP := &nodestate.Node{Name: "n", HMACKeys: want.HMACKeys, BGP: want.BGP, Routes: want.Routes[1:]}
	if diff := cmp.Diff(wantP, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("probed (-want +got):\n%s", diff)
	}
	if probed(nil) != nil {
		t.Error("probed(nil) != nil")
	}
}

// A connection reset right after the TLS handshake is a refused
// certificate or an agent that died while it was set up: the error says
// both, with the way to bring the agent back (TestPrivilegedAgentRestartedAfterKill9
// met the second and got no hint).
func TestResetAfterHandshakeHints(t *testing.T) {
	c := &Client{node: "nfv1", addr: "[fd00::5]:7070"}
	c.SetHint("`segchain lab restart-agents --lab l nfv1` starts it again")
	err := c.wrap("version", status.Error(codes.Unavailable, `connection error: desc = "transport: authentication handshake failed: read tcp: read: connection reset by peer"`))
	for _, want := range []string{"refused this controller's certificate", "or it stopped", "restart-agents --lab l nfv1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v: want %q in it", err, want)
		}
	}
}

// A connection reset while dialling (an agent that died with its
// listener's queue holding the connection) is an unreachable agent, not
// one that closed the connection after the handshake.
func TestResetWhileDialingUnreachable(t *testing.T) {
	c := &Client{node: "nfv1", addr: "[fd00::5]:7070"}
	c.SetHint("`segchain lab restart-agents --lab l nfv1` starts it again")
	err := c.wrap("version", status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp [fd00::5]:7070: connect: connection reset by peer"`))
	for _, want := range []string{"unreachable", "restart-agents --lab l nfv1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v: want %q in it", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "after the TLS handshake") {
		t.Errorf("error %v: a reset while dialling called one after the handshake", err)
	}
}
