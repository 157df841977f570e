package dataplane

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/testutil"
)

// TestPrivilegedIproute2Oracle uses iproute2 as an independent codec in both
// directions: a route installed by `ip route add` must decode to the
// expected model, and the same route installed by ReplaceRoute (in another
// table) must be printed by `ip -d route show` exactly like iproute2's own.
func TestPrivilegedIproute2Oracle(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireTool(t, "ip")
	ns := newRouteNetns(t)
	h := openT(t, ns)
	segs := []netip.Addr{ip("fc00:2::1"), ip("fc00:3::1"), ip("fc00:4::1")}
	tests := []struct {
		name  string
		ipCmd string // after `ip -6 route add` (or `ip -4 ...` for IPv4)
		want  nodestate.Route
	}{
		{"encap", "fc00:d::/64 encap seg6 mode encap segs fc00:2::1,fc00:3::1,fc00:4::1 dev dp0",
			nodestate.Route{Dst: pfx("fc00:d::/64"), Dev: "dp0", Seg6: &nodestate.Seg6Encap{Mode: "encap", Segs: segs}}},
		{"inline hmac", "fc00:d::/64 encap seg6 mode inline segs fc00:2::1,fc00:3::1 hmac 7 dev dp0",
			nodestate.Route{Dst: pfx("fc00:d::/64"), Dev: "dp0", Seg6: &nodestate.Seg6Encap{Mode: "inline", Segs: segs[:2], HMACKeyID: 7}}},
		{"l2encap.red", "fc00:d::/64 encap seg6 mode l2encap.red segs fc00:2::1,fc00:3::1 dev dp0",
			nodestate.Route{Dst: pfx("fc00:d::/64"), Dev: "dp0", Seg6: &nodestate.Seg6Encap{Mode: "l2encap.red", Segs: segs[:2]}}},
		{"encap.red hmac", "fc00:d::/64 encap seg6 mode encap.red segs fc00:2::1,fc00:3::1,fc00:4::1 hmac 300 dev dp0",
			nodestate.Route{Dst: pfx("fc00:d::/64"), Dev: "dp0", Seg6: &nodestate.Seg6Encap{Mode: "encap.red", Segs: segs, HMACKeyID: 300}}},
		{"ipv4 encap", "-4 10.5.0.0/16 encap seg6 mode encap segs fc00:2::1 dev dp0",
			nodestate.Route{Dst: pfx("10.5.0.0/16"), Dev: "dp0", Seg6: &nodestate.Seg6Encap{Mode: "encap", Segs: segs[:1]}}},
		{"static metric", "fc00:e::/64 via fc00:12::2 dev dp0 metric 33",
			nodestate.Route{Dst: pfx("fc00:e::/64"), Via: ip("fc00:12::2"), Dev: "dp0", Metric: 33}},
		{"End count", "local fc00:1::1/128 encap seg6local action End count dev lo",
			nodestate.Route{Dst: pfx("fc00:1::1/128"), Seg6Local: &nodestate.Seg6Local{Action: "End", Count: true}}},
		{"End psp", "local fc00:1::1/128 encap seg6local action End flavors psp dev lo",
			nodestate.Route{Dst: pfx("fc00:1::1/128"), Seg6Local: &nodestate.Seg6Local{Action: "End", Flavors: []string{"psp"}}}},
		// Without lengths the kernel applies (and dumps) its defaults, F3216's.
		{"End next-csid", "local fc00:1::1/128 encap seg6local action End flavors next-csid dev lo",
			nodestate.Route{Dst: pfx("fc00:1::1/128"), Seg6Local: &nodestate.Seg6Local{Action: "End", Flavors: []string{"next-csid"}, LBLen: 32, NFLen: 16}}},
		// F4816 (issue 31: a /48 block): segchain sends the lengths.
		{"End next-csid lblen 48", "local 2001:db8:aa:100::/64 encap seg6local action End flavors next-csid lblen 48 nflen 16 count dev lo",
			nodestate.Route{Dst: pfx("2001:db8:aa:100::/64"), Seg6Local: &nodestate.Seg6Local{Action: "End", Flavors: []string{"next-csid"}, LBLen: 48, NFLen: 16, Count: true}}},
		{"End.X next-csid lblen 56", "local 2001:db8:aa:bb02:100::/72 encap seg6local action End.X nh6 fc00:12::2 oif dp0 flavors next-csid lblen 56 nflen 16 dev lo",
			nodestate.Route{Dst: pfx("2001:db8:aa:bb02:100::/72"), Seg6Local: &nodestate.Seg6Local{Action: "End.X", Nh6: ip("fc00:12::2"), Oif: "dp0", Flavors: []string{"next-csid"}, LBLen: 56, NFLen: 16}}},
		{"End.X oif", "local fc00:1::2/128 encap seg6local action End.X nh6 fc00:12::2 oif dp0 dev lo",
			nodestate.Route{Dst: pfx("fc00:1::2/128"), Seg6Local: &nodestate.Seg6Local{Action: "End.X", Nh6: ip("fc00:12::2"), Oif: "dp0"}}},
		{"End.T", "local fc00:1::3/128 encap seg6local action End.T table 100 dev lo",
			nodestate.Route{Dst: pfx("fc00:1::3/128"), Seg6Local: &nodestate.Seg6Local{Action: "End.T", Table: 100}}},
		{"End.DX2", "fc00:1::4/128 encap seg6local action End.DX2 oif dp1 dev dp0",
			nodestate.Route{Dst: pfx("fc00:1::4/128"), Dev: "dp0", Seg6Local: &nodestate.Seg6Local{Action: "End.DX2", Oif: "dp1"}}},
		{"End.DX4", "local fc00:1::5/128 encap seg6local action End.DX4 nh4 10.0.0.2 count dev lo",
			nodestate.Route{Dst: pfx("fc00:1::5/128"), Seg6Local: &nodestate.Seg6Local{Action: "End.DX4", Nh4: ip("10.0.0.2"), Count: true}}},
		{"End.DX6", "local fc00:1::6/128 encap seg6local action End.DX6 nh6 fc00:12::2 dev lo",
			nodestate.Route{Dst: pfx("fc00:1::6/128"), Seg6Local: &nodestate.Seg6Local{Action: "End.DX6", Nh6: ip("fc00:12::2")}}},
		{"local delivery", "local fc00:1a::1/128 dev lo",
			nodestate.Route{Dst: pfx("fc00:1a::1/128"), Table: 100, Local: true}},
		{"End.DT6", "local fc00:1::7/128 encap seg6local action End.DT6 table 100 dev lo",
			nodestate.Route{Dst: pfx("fc00:1::7/128"), Seg6Local: &nodestate.Seg6Local{Action: "End.DT6", Table: 100}}},
		{"End.B6 hmac", "local fc00:1::8/128 encap seg6local action End.B6 srh segs fc00:2::1,fc00:3::1 hmac 5 dev lo",
			nodestate.Route{Dst: pfx("fc00:1::8/128"), Seg6Local: &nodestate.Seg6Local{Action: "End.B6", Segs: segs[:2], HMAC: 5}}},
		{"End.B6.Encaps", "local fc00:1::9/128 encap seg6local action End.B6.Encaps srh segs fc00:2::1,fc00:3::1,fc00:4::1 dev lo",
			nodestate.Route{Dst: pfx("fc00:1::9/128"), Seg6Local: &nodestate.Seg6Local{Action: "End.B6.Encaps", Segs: segs}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fam := "-6"
			// SIDs on lo are type local (see ReplaceRoute), hence "local" in ipCmd.
			args := strings.Fields(tc.ipCmd)
			if args[0] == "-4" {
				fam, args = "-4", args[1:]
			}
			// 1. iproute2 encodes, we decode.
			testutil.Exec(t, ns, append([]string{"ip", fam, "route", "add"}, append(args, "table", "100", "proto", fmt.Sprint(nodestate.Proto))...)...)
			t.Cleanup(func() { testutil.ExecErr(ns, "ip", fam, "route", "flush", "table", "100") })
			got, err := h.Routes()
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			want.Table = 100
			if diff := cmp.Diff([]nodestate.Route{want}, got, cmpOpts); diff != "" {
				t.Errorf("decoding iproute2's route (-want +got):\n%s", diff)
			}
			// 2. we encode, iproute2 decodes: identical text to its own.
			ours := tc.want
			ours.Table = 200
			if err := h.ReplaceRoute(ours); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { testutil.ExecErr(ns, "ip", fam, "route", "flush", "table", "200") })
			theirs := testutil.Exec(t, ns, "ip", "-d", "-s", fam, "route", "show", "table", "100")
			mine := testutil.Exec(t, ns, "ip", "-d", "-s", fam, "route", "show", "table", "200")
			if theirs == "" || theirs != mine {
				t.Errorf("ip route show differs:\niproute2: %q\nsegchain: %q", theirs, mine)
			}
		})
	}
}
