package dataplane

import (
	"errors"
	"net/netip"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/testutil"
)

var cmpOpts = cmp.Options{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

// newRouteNetns creates a namespace with a veth pair (dp0 <-> dp1, both up)
// carrying 10.0.0.1/24 and fc00:12::1/64 on dp0, so gateways resolve.
func newRouteNetns(t *testing.T) string {
	t.Helper()
	ns := testutil.NewNetns(t, "dpr")
	for _, c := range [][]string{
		{"ip", "link", "add", "dp0", "type", "veth", "peer", "name", "dp1"},
		{"ip", "link", "set", "dp0", "up"},
		{"ip", "link", "set", "dp1", "up"},
		{"ip", "addr", "add", "10.0.0.1/24", "dev", "dp0"},
		{"ip", "addr", "add", "fc00:12::1/64", "dev", "dp0", "nodad"},
	} {
		testutil.Exec(t, ns, c...)
	}
	return ns
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func ip(s string) netip.Addr    { return netip.MustParseAddr(s) }

func sortRoutes(rs []nodestate.Route) {
	sort.Slice(rs, func(i, j int) bool { return rs[i].Key() < rs[j].Key() })
}

// pinTrivialSeg6LocalProg loads "return BPF_OK" as an lwt_seg6local program
// and pins it on a private bpffs mounted in a temp dir.
func pinTrivialSeg6LocalProg(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("bpf", dir, "bpf", 0, ""); err != nil {
		t.Fatalf("cannot mount bpffs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.LWTSeg6Local, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		t.Fatalf("cannot load lwt_seg6local program: %v", err)
	}
	defer prog.Close()
	path := filepath.Join(dir, "end_bpf")
	if err := prog.Pin(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPrivilegedRouteRoundTrip(t *testing.T) {
	testutil.RequireRoot(t)
	ns := newRouteNetns(t)
	h := openT(t, ns)
	feat := h.Probe()
	segs := []netip.Addr{ip("fc00:2::1"), ip("fc00:3::1"), ip("fc00:4::1")}
	local := func(dst string, l nodestate.Seg6Local) nodestate.Route {
		return nodestate.Route{Dst: pfx(dst), Seg6Local: &l}
	}
	tests := []struct {
		name  string
		route nodestate.Route
		needs Feature // zero value: always supported
	}{
		{name: "ipv4 static via", route: nodestate.Route{Dst: pfx("10.9.0.0/16"), Via: ip("10.0.0.2"), Dev: "dp0"}},
		{name: "ipv4 static table metric", route: nodestate.Route{Dst: pfx("10.8.0.0/16"), Via: ip("10.0.0.2"), Dev: "dp0", Table: 100, Metric: 7}},
		{name: "ipv6 static via", route: nodestate.Route{Dst: pfx("fc00:99::/48"), Via: ip("fc00:12::2"), Dev: "dp0"}},
		{name: "ipv6 static big table", route: nodestate.Route{Dst: pfx("fc00:98::/48"), Via: ip("fc00:12::2"), Dev: "dp0", Table: 1000, Metric: 50}},
		{name: "H.Encaps", route: nodestate.Route{Dst: pfx("fc00:d::/64"), Dev: "dp0", Seg6: &nodestate.Seg6Encap{Mode: "encap", Segs: segs}}},
		{name: "H.Encaps single sid", route: nodestate.Route{Dst: pfx("fc00:d1::/64"), Dev: "dp0", Seg6: &nodestate.Seg6Encap{Mode: "encap", Segs: segs[:1]}}},
		{name: "H.Encaps hmac", route: nodestate.Route{Dst: pfx("fc00:d2::/64"), Dev: "dp0", Seg6: &nodestate.Seg6Encap{Mode: "encap", Segs: segs, HMACKeyID: 42}}},
		{name: "H.Insert", route: nodestate.Route{Dst: pfx("fc00:d3::/64"), Dev: "dp0", Seg6: &nodestate.Seg6Encap{Mode: "inline", Segs: segs}}},
		{name: "H.Insert hmac", route: nodestate.Route{Dst: pfx("fc00:d4::/64"), Dev: "dp0", Seg6: &nodestate.Seg6Encap{Mode: "inline", Segs: segs[:2], HMACKeyID: 7}}},
		{name: "H.Encaps.L2", route: nodestate.Route{Dst: pfx("fc00:d5::/64"), Dev: "dp0", Seg6: &nodestate.Seg6Encap{Mode: "l2encap", Segs: segs}}, needs: feat.L2Encap},
		{name: "H.Encaps.Red", route: nodestate.Route{Dst: pfx("fc00:d6::/64"), Dev: "dp0", Seg6: &nodestate.Seg6Encap{Mode: "encap.red", Segs: segs}}, needs: feat.EncapRed},
		{name: "H.Encaps.L2.Red", route: nodestate.Route{Dst: pfx("fc00:d7::/64"), Dev: "dp0", Seg6: &nodestate.Seg6Encap{Mode: "l2encap.red", Segs: segs}}, needs: feat.L2EncapRed},
		{name: "IPv4 in IPv6 H.Encaps", route: nodestate.Route{Dst: pfx("192.168.50.0/24"), Dev: "dp0", Table: 100, Seg6: &nodestate.Seg6Encap{Mode: "encap", Segs: segs}}},
		{name: "End", route: local("fc00:1::1/128", nodestate.Seg6Local{Action: "End"})},
		{name: "End count", route: local("fc00:1::2/128", nodestate.Seg6Local{Action: "End", Count: true}), needs: feat.Counters},
		{name: "End psp", route: local("fc00:1::3/128", nodestate.Seg6Local{Action: "End", Flavors: []string{"psp"}}), needs: feat.FlavorPSP},
		{name: "End next-csid", route: local("fc00:1::4/128", nodestate.Seg6Local{Action: "End", Flavors: []string{"next-csid"}}), needs: feat.FlavorNextCSID},
		{name: "End.X", route: local("fc00:1::5/128", nodestate.Seg6Local{Action: "End.X", Nh6: ip("fc00:12::2"), Count: true})},
		{name: "End.X oif", route: local("fc00:1::6/128", nodestate.Seg6Local{Action: "End.X", Nh6: ip("fc00:12::2"), Oif: "dp0"})},
		{name: "End.T", route: local("fc00:1::7/128", nodestate.Seg6Local{Action: "End.T", Table: 100})},
		{name: "End.DX2", route: nodestate.Route{Dst: pfx("fc00:1::8/128"), Dev: "dp0", Seg6Local: &nodestate.Seg6Local{Action: "End.DX2", Oif: "dp1"}}},
		{name: "End.DX4", route: local("fc00:1::9/128", nodestate.Seg6Local{Action: "End.DX4", Nh4: ip("10.0.0.2"), Count: true})},
		{name: "End.DX6", route: local("fc00:1::a/128", nodestate.Seg6Local{Action: "End.DX6", Nh6: ip("fc00:12::2")})},
		{name: "End.DT6 table", route: local("fc00:1::b/128", nodestate.Seg6Local{Action: "End.DT6", Table: 100, Count: true})},
		{name: "End.DT6 vrftable", route: local("fc00:1::c/128", nodestate.Seg6Local{Action: "End.DT6", VRFTable: 100}), needs: feat.VRFTable},
		{name: "End.DT4", route: local("fc00:1::d/128", nodestate.Seg6Local{Action: "End.DT4", VRFTable: 100}), needs: feat.EndDT4},
		{name: "End.DT46", route: local("fc00:1::e/128", nodestate.Seg6Local{Action: "End.DT46", VRFTable: 100}), needs: feat.EndDT46},
		{name: "End.B6", route: local("fc00:1::f/128", nodestate.Seg6Local{Action: "End.B6", Segs: segs})},
		{name: "End.B6 hmac", route: local("fc00:1::10/128", nodestate.Seg6Local{Action: "End.B6", Segs: segs[:2], HMAC: 3})},
		{name: "End.B6.Encaps", route: local("fc00:1::11/128", nodestate.Seg6Local{Action: "End.B6.Encaps", Segs: segs, Count: true})},
		{name: "End.B6.Encaps hmac", route: local("fc00:1::12/128", nodestate.Seg6Local{Action: "End.B6.Encaps", Segs: segs[:1], HMAC: 9})},
		{name: "End in table", route: nodestate.Route{Dst: pfx("fc00:1::13/128"), Table: 300, Metric: 5, Seg6Local: &nodestate.Seg6Local{Action: "End"}}},
		{name: "local delivery", route: nodestate.Route{Dst: pfx("fc00:1a::1/128"), Local: true}},
		{name: "local delivery in table", route: nodestate.Route{Dst: pfx("fc00:1a::2/128"), Table: 100, Local: true}},
		{name: "End on locator prefix", route: local("fc00:5::/64", nodestate.Seg6Local{Action: "End"})},
		{name: "End.BPF", route: local("fc00:1::14/128", nodestate.Seg6Local{Action: "End.BPF", BPF: pinTrivialSeg6LocalProg(t)}), needs: feat.EndBPF},
	}
	var want []nodestate.Route
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needs.Name != "" {
				checkProbe(t, tc.needs) // an outside oracle agrees with Probe
			}
			if tc.needs.Name != "" && !tc.needs.Supported {
				// The kernel must refuse it, and we report why.
				err := h.ReplaceRoute(tc.route)
				if err == nil {
					t.Errorf("ReplaceRoute(%s) succeeded although Probe says %s unsupported", tc.route, tc.needs.Name)
				} else if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), tc.needs.Reason) {
					t.Errorf("ReplaceRoute error %q: want ErrNotSupported with the probe's reason %q", err, tc.needs.Reason)
				}
				t.Skipf("%s: %s", tc.needs.Name, tc.needs.Reason)
			}
			if err := h.ReplaceRoute(tc.route); err != nil {
				t.Fatal(err)
			}
			// Replacing again must not duplicate it.
			if err := h.ReplaceRoute(tc.route); err != nil {
				t.Fatal(err)
			}
			want = append(want, Canonical(tc.route))
		})
	}
	got, err := h.Routes()
	if err != nil {
		t.Fatal(err)
	}
	sortRoutes(got)
	sortRoutes(want)
	if diff := cmp.Diff(want, got, cmpOpts); diff != "" {
		t.Errorf("Routes() (-want +got):\n%s", diff)
	}

	// Non-segchain routes are not reported by Routes but are LocalSIDs.
	testutil.Exec(t, ns, "ip", "-6", "route", "add", "fc00:7::1/128", "encap", "seg6local", "action", "End", "dev", "lo")
	sids, err := h.LocalSIDs()
	if err != nil {
		t.Fatal(err)
	}
	protos := map[string]int{}
	for _, s := range sids {
		protos[s.Route.Dst.String()] = s.Protocol
		if (s.Counters != nil) != s.Route.Seg6Local.Count {
			t.Errorf("%s: counters %v with count=%v", s.Route.Dst, s.Counters, s.Route.Seg6Local.Count)
		}
	}
	if p, ok := protos["fc00:7::1/128"]; !ok || p != unix.RTPROT_BOOT {
		t.Errorf("LocalSIDs: foreign SID protocol = %d, present = %v; want %d", p, ok, unix.RTPROT_BOOT)
	}
	if p := protos["fc00:1::1/128"]; p != nodestate.Proto {
		t.Errorf("LocalSIDs: segchain SID protocol = %d, want %d", p, nodestate.Proto)
	}
	if got2, _ := h.Routes(); len(got2) != len(got) {
		t.Errorf("foreign route leaked into Routes(): %d routes, want %d", len(got2), len(got))
	}
	// One dump per family says what Routes and LocalSIDs say.
	both, bothSIDs, err := h.RoutesAndLocalSIDs()
	if err != nil {
		t.Fatal(err)
	}
	sortRoutes(both)
	if diff := cmp.Diff(want, both, cmpOpts); diff != "" {
		t.Errorf("RoutesAndLocalSIDs routes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sids, bothSIDs, cmpOpts); diff != "" {
		t.Errorf("RoutesAndLocalSIDs local SIDs (-LocalSIDs +got):\n%s", diff)
	}

	// Delete everything we installed; the foreign route must survive.
	for _, r := range want {
		if err := h.DeleteRoute(r); err != nil {
			t.Errorf("DeleteRoute: %v", err)
		}
	}
	if got, err := h.Routes(); err != nil || len(got) != 0 {
		t.Errorf("after DeleteRoute: %v, %v; want none", got, err)
	}
	if err := h.DeleteRoute(want[0]); !errors.Is(err, unix.ESRCH) {
		t.Errorf("deleting a missing route: %v, want ESRCH", err)
	}
	// DeleteRoute only removes segchain's routes.
	if err := h.DeleteRoute(nodestate.Route{Dst: pfx("fc00:7::1/128")}); err == nil {
		t.Error("DeleteRoute removed a route with another protocol")
	}
	if out := testutil.Exec(t, ns, "ip", "-6", "route", "show", "fc00:7::1/128"); !strings.Contains(out, "seg6local") {
		t.Errorf("foreign route gone: %q", out)
	}
}

func TestPrivilegedRouteErrors(t *testing.T) {
	testutil.RequireRoot(t)
	ns := newRouteNetns(t)
	h := openT(t, ns)
	tests := []struct {
		name string
		r    nodestate.Route
	}{
		{"unknown dev", nodestate.Route{Dst: pfx("fc00:9::/64"), Dev: "nope0", Seg6: &nodestate.Seg6Encap{Mode: "encap", Segs: []netip.Addr{ip("fc00::1")}}}},
		{"End.X without nh6", nodestate.Route{Dst: pfx("fc00:9::1/128"), Seg6Local: &nodestate.Seg6Local{Action: "End.X"}}},
		{"inline on ipv4", nodestate.Route{Dst: pfx("10.7.0.0/16"), Dev: "dp0", Seg6: &nodestate.Seg6Encap{Mode: "inline", Segs: []netip.Addr{ip("fc00::1")}}}},
		{"End.BPF missing pin", nodestate.Route{Dst: pfx("fc00:9::2/128"), Seg6Local: &nodestate.Seg6Local{Action: "End.BPF", BPF: "/nonexistent/pin"}}},
		{"via family mismatch", nodestate.Route{Dst: pfx("fc00:9::/64"), Via: ip("10.0.0.2")}},
		// The kernel would silently drop these flavors: refused up front.
		{"End.T psp", nodestate.Route{Dst: pfx("fc00:9::3/128"), Seg6Local: &nodestate.Seg6Local{Action: "End.T", Table: 100, Flavors: []string{"psp"}}}},
		{"End.DT6 next-csid", nodestate.Route{Dst: pfx("fc00:9::4/128"), Seg6Local: &nodestate.Seg6Local{Action: "End.DT6", Table: 100, Flavors: []string{"next-csid"}}}},
		{"End.X psp", nodestate.Route{Dst: pfx("fc00:9::5/128"), Seg6Local: &nodestate.Seg6Local{Action: "End.X", Nh6: ip("fc00:12::2"), Flavors: []string{"psp"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := h.ReplaceRoute(tc.r)
			if err == nil {
				t.Fatalf("ReplaceRoute(%s) succeeded", tc.r)
			}
			if !strings.Contains(err.Error(), ns) {
				t.Errorf("error lacks the namespace: %v", err)
			}
		})
	}
	if rs, _ := h.Routes(); len(rs) != 0 {
		t.Errorf("failed installs left routes: %v", rs)
	}
}

// A SID without a device lands on lo as a local route; lo is brought up
// when a fresh namespace still has it down.
func TestPrivilegedSIDOnDownLoopback(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetns(t, "dplo")
	testutil.Exec(t, ns, "ip", "link", "set", "lo", "down")
	h := openT(t, ns)
	sid := nodestate.Route{Dst: pfx("fc00:1::1/128"), Seg6Local: &nodestate.Seg6Local{Action: "End"}}
	if err := h.ReplaceRoute(sid); err != nil {
		t.Fatal(err)
	}
	// iproute2 hides local-type routes of table main unless asked for "table all".
	out := testutil.Exec(t, ns, "ip", "-6", "route", "show", "table", "all", "fc00:1::1")
	if !strings.HasPrefix(out, "local fc00:1::1 ") || !strings.Contains(out, "dev lo") {
		t.Errorf("ip -6 route show = %q, want a local route on lo", out)
	}
	if out := testutil.Exec(t, ns, "ip", "link", "show", "lo"); !strings.Contains(out, ",UP") {
		t.Errorf("lo not up: %s", out)
	}
}
