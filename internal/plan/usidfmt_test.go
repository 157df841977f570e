package plan

import (
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/pool"
)

// Issue 31's general SID formats: a block of any length that is a
// multiple of 8 (f4816: a /48, csid: any /8../96) with 16-bit uSIDs.

const f4816SID = `{format: f4816, block: "2001:db8:aa::/48"}`

// TestGoldenF4816 renders every example domain (but the BGP one) in
// f4816 against testdata/<example>-f4816.golden: the same chains as in
// f3216, five uSIDs a container, every next-csid route with lblen 48.
func TestGoldenF4816(t *testing.T) { goldenFormat(t, "f4816", f4816SID) }

// TestUSIDFormatRefusals: what the general formats cannot take is refused
// with the field path and the reason.
func TestUSIDFormatRefusals(t *testing.T) {
	sidRefusals(t, []sidRefusal{
		{"f4816 without block", "{format: f4816}", "", "sid.block (line 38:6): sid.format f4816 needs a block"},
		{"csid without block", "{format: csid}", "", "sid.block (line 38:6): sid.format csid needs a block"},
		{"f4816 with a /32", `{format: f4816, block: "fcbb:bb00::/32"}`, "", "f4816 wants a /48 block"},
		{"f3216 with a /48", `{format: f3216, block: "2001:db8:aa::/48"}`, "", "f3216 wants a /32 block"},
		{"block not a multiple of 8", `{format: csid, block: "2001:db8:a0::/44"}`, "", "must be a positive multiple of 8"},
		{"block too long", `{format: csid, block: "2001:db8:aa:bb:cc:dd:ee00::/104"}`, "", "at most /96 (two uSIDs a container)"},
		{"host bits", `{format: f4816, block: "2001:db8:aa:1::/48"}`, "", "host bits set"},
		{"IPv4 block", `{format: csid, block: "10.0.0.0/8"}`, "", "want an IPv6 prefix"},
		{"usid_bits 8", `{format: f4816, block: "2001:db8:aa::/48", usid_bits: 8}`, "", "sid.usid_bits (line 38:60): 8: only 16-bit uSIDs are offered"},
		{"usid_bits 32", `{format: csid, block: "2001:db8:aa::/48", usid_bits: 32}`, "", "only 16-bit uSIDs"},
		{"usid_bits in full", `{usid_bits: 16}`, "", "sid.usid_bits"},
		{"block overlaps a locator", `{format: csid, block: "fc00::/16"}`, "", "nodes.egress.locator"},
		{"block overlaps a link", `{format: f4816, block: "fc00:1a::/48"}`, "", "links[0].ipv6"},
		{"node id", `{format: f4816, block: "2001:db8:aa::/48"}`, "", "nodes.nfv1.id (line 44:32): id 300: sid.format f4816 gives node ID the uN uSID ID<<8"},
		{"bgp", `{format: f4816, block: "2001:db8:aa::/48"}`, "routing:\n  mode: bgp\n", "routing.mode"},
	})
}

// TestUSIDFormatPack: the container holds (128 − LBL) / 16 uSIDs (5 in
// f4816, 4 with a /56 block, 2 with a /96): a chain of seven End hops and
// the egress spills into ceil(8 / n) containers, encap.red, each uSID
// read back from the containers in hop order; every End next-csid route
// carries the format's lengths, the uN is block:ID00::/(LBL+16) and the
// other nodes reach it by its /(LBL+8).
func TestUSIDFormatPack(t *testing.T) {
	for _, tc := range []struct {
		sid        string
		lbl, per   int
		containers int
	}{
		{"{format: f3216}", 32, 6, 2},
		{f4816SID, 48, 5, 2},
		{`{format: csid, block: "2001:db8:aa:bb00::/56", usid_bits: 16}`, 56, 4, 2},
		{`{format: csid, block: "2001:db8:aa:bb:cc:dd::/96"}`, 96, 2, 4},
		{`{format: csid, block: "fd00::/8"}`, 8, 7, 2},
	} {
		t.Run(tc.sid, func(t *testing.T) {
			d, err := withSID(t, "../../examples/default.yaml", tc.sid)
			if err != nil {
				t.Fatal(err)
			}
			f := d.USIDFormat()
			if f.Block.Bits() != tc.lbl || f.PerContainer() != tc.per {
				t.Fatalf("format %v: /%d, %d a container; want /%d, %d", f, f.Block.Bits(), f.PerContainer(), tc.lbl, tc.per)
			}
			for i := 0; i < 7; i++ {
				node := []string{"nfv1", "nfv2"}[i%2]
				name := "e" + string(rune('a'+i))
				d.Services[name] = &config.Service{Node: node, Behavior: "End"}
				d.Chains["web"].Services = append(d.Chains["web"].Services, name)
			}
			d.Chains["web"].Services = d.Chains["web"].Services[2:]
			p, err := Build(d)
			if err != nil {
				t.Fatal(err)
			}
			var web *Chain
			for i := range p.Chains {
				if p.Chains[i].Name == "web" {
					web = &p.Chains[i]
				}
			}
			if web == nil {
				t.Fatal("no chain web")
			}
			if len(web.Hops) != 8 || len(web.Segments) != tc.containers || web.Encap != "encap.red" {
				t.Fatalf("web: %d hops pushed as %s %v, want 8 hops in %d containers, encap.red", len(web.Hops), web.Encap, web.Segments, tc.containers)
			}
			var got []netip.Addr
			for _, s := range web.Segments {
				if !f.Block.Contains(s) {
					t.Fatalf("container %s outside the block %s", s, f.Block)
				}
				for a := s; ; {
					c, err := f.Decode(a)
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, f.SID(c.Active))
					var ok bool
					if a, ok = f.Shift(a); !ok {
						break
					}
				}
			}
			if len(got) != len(web.Hops) {
				t.Fatalf("%d uSIDs in the containers, want %d", len(got), len(web.Hops))
			}
			for i, h := range web.Hops {
				if got[i] != h.SID {
					t.Errorf("uSID %d = %s, want hop %s", i, got[i], h.SID)
				}
			}
			un := netip.PrefixFrom(f.SID(uint32(d.Nodes["nfv2"].ID)<<8), tc.lbl+16)
			loc := netip.PrefixFrom(f.SID(uint32(d.Nodes["nfv2"].ID)<<8), tc.lbl+8)
			var sawUN, sawLoc bool
			for _, r := range p.Nodes["nfv2"].Routes {
				if l := r.Seg6Local; l != nil && (l.Action == "End" || l.Action == "End.X") && f.Block.Contains(r.Dst.Addr()) {
					if l.LBLen != tc.lbl || l.NFLen != 16 {
						t.Errorf("%s: lblen %d nflen %d, want %d 16", r, l.LBLen, l.NFLen, tc.lbl)
					}
					if r.Dst.Bits() != tc.lbl+16 {
						t.Errorf("%s: a uSID route of /%d, want /%d", r, r.Dst.Bits(), tc.lbl+16)
					}
					sawUN = sawUN || r.Dst == un
				}
			}
			for _, r := range p.Nodes["nfv1"].Routes {
				sawLoc = sawLoc || (r.Dst == loc && r.Seg6Local == nil && r.Via.IsValid())
			}
			if !sawUN || !sawLoc {
				t.Errorf("nfv2's uN %s on nfv2: %v; its locator %s routed on nfv1: %v", un, sawUN, loc, sawLoc)
			}
		})
	}
}

// TestCSIDLengthsDrift: a next-csid route with other lengths than the
// plan's renders differently (the diff replaces it); one without lengths
// is the kernel's default, F3216's.
func TestCSIDLengthsDrift(t *testing.T) {
	r := func(lb, nf int) nodestate.Route {
		return nodestate.Route{Dst: netip.MustParsePrefix("2001:db8:aa:200::/64"),
			Seg6Local: &nodestate.Seg6Local{Action: "End", Flavors: []string{"next-csid"}, LBLen: lb, NFLen: nf}}
	}
	if r(48, 16).String() == r(32, 16).String() || r(48, 16).String() == r(0, 0).String() {
		t.Errorf("lblen 48 renders as lblen 32: %s", r(48, 16))
	}
	if r(0, 0).String() != r(32, 16).String() {
		t.Errorf("no lengths %q, want the kernel's defaults %q", r(0, 0), r(32, 16))
	}
	if !strings.Contains(r(48, 16).String(), "flavors next-csid lblen 48 nflen 16") {
		t.Errorf("%s: want iproute2's spelling", r(48, 16))
	}
}

// TestPoolsF4816: a pool's uSID members in f4816 — each instance's list
// (and its probes') starts with the instance's uSID, the 16 bits after the
// 48-bit block, and every next-csid route of the pooled domain carries
// lblen 48.
func TestPoolsF4816(t *testing.T) {
	b, err := os.ReadFile("../../test/pools/testdata/pooled.yaml")
	if err != nil {
		t.Fatal(err)
	}
	y := strings.Replace(string(b), "name: pools", "name: pools\nsid: "+f4816SID, 1)
	d, err := config.Parse([]byte(y), "../../test/pools/testdata")
	if err != nil {
		t.Fatalf("a pool of uSID members in f4816: %v", err)
	}
	p, err := Build(d)
	if err != nil {
		t.Fatal(err)
	}
	f := d.USIDFormat()
	var sp pool.Spec
	for _, s := range p.Nodes["ingress"].Services {
		if s.Kind == pool.Name {
			if sp, err = pool.SpecOf(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(sp.Chains) != 1 || len(sp.Chains[0].Instances) != 3 {
		t.Fatalf("pool spec at ingress: chains %+v", sp.Chains)
	}
	for k, in := range sp.Pool.Instances {
		v, ok := f.Value(in.SID)
		if !ok {
			t.Fatalf("instance %s: SID %s is not a uSID of %s", in.Name, in.SID, f.Block)
		}
		first, err := f.Decode(sp.Chains[0].Instances[k].Segs[0])
		if err != nil || first.Active != v {
			t.Errorf("instance %s (%s): list %v does not start with its uSID (%v)", in.Name, in.SID, sp.Chains[0].Instances[k].Segs, err)
		}
		if pr, err := f.Decode(sp.Probes[k].Segs[0]); err != nil || pr.Active != v {
			t.Errorf("instance %s: probe list %v does not start with its uSID", in.Name, sp.Probes[k].Segs)
		}
	}
	for n, ns := range p.Nodes {
		for _, r := range ns.Routes {
			if l := r.Seg6Local; l != nil && slices.Contains(l.Flavors, "next-csid") && (l.LBLen != 48 || l.NFLen != 16) {
				t.Errorf("%s: %s: want lblen 48 nflen 16", n, r)
			}
		}
	}
}
