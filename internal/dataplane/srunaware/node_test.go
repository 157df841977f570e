package srunaware

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/testutil"
)

// TestNodeLifecycle: sid add pins state that survives the process handle,
// show reports it, del/flush remove exactly what was added.
func TestNodeLifecycle(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetns(t, "pxn")
	t.Cleanup(func() { _ = Remove(ns) })
	testutil.Exec(t, ns, "ip", "link", "add", "sf0", "type", "veth", "peer", "sf1")
	testutil.Exec(t, ns, "ip", "link", "add", "up0", "type", "veth", "peer", "up1")
	ext := Extension{}
	if installed(ns) {
		t.Fatal("fresh namespace reports proxy state")
	}
	ad := netip.MustParsePrefix("fc00:2::ad/128")
	as := netip.MustParsePrefix("fc00:2::a5/128")
	am := netip.MustParsePrefix("fc00:2::a3/128")
	if err := ext.Add(ns, ad, "End.AD6", strings.Fields("nh6 fc00:5f::2 oif sf0 iif sf0")); err != nil {
		t.Fatal(err)
	}
	if err := ext.Add(ns, as, "End.AS", strings.Fields("inner ipv4 mac 02:00:00:00:00:01 oif sf1 iif sf1 src fc00:2::5 segs fc00:3::1,fc00:4::1 tag 3")); err != nil {
		t.Fatal(err)
	}
	af := netip.MustParsePrefix("fc00:2::af/128")
	ae := netip.MustParsePrefix("fc00:2::a2/128")
	if err := ext.Add(ns, af, "End.AD6", strings.Fields("nh6 fc00:5f::2 oif up0 iif up0 flow max 100 timeout 30")); err != nil {
		t.Fatal(err)
	}
	if err := ext.Add(ns, ae, "End.AD", strings.Fields("inner ethernet oif up1 iif up1")); err != nil {
		t.Fatal(err)
	}
	// IFACE-IN is exclusive.
	if err := ext.Add(ns, am, "End.AM", strings.Fields("nh6 fc00:5f::2 oif sf0 iif sf0")); err == nil || !strings.Contains(err.Error(), "exclusive") {
		t.Fatalf("second proxy on sf0: %v, want an exclusivity error", err)
	}
	if err := ext.Add(ns, ad, "End.AD6", strings.Fields("nh6 fc00:5f::2 oif up0 iif up0")); err == nil {
		t.Fatal("duplicate SID accepted")
	}
	dir, err := pinDir(ns, false)
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.TCXIngressCount(t, ns, "up1"); n != 1 {
		t.Errorf("%d programs attached to up1, want 1", n)
	}
	links, _ := filepath.Glob(filepath.Join(dir, "tcx-*"))
	if len(links) != 4 { // sf0, sf1, up0, up1
		t.Errorf("pinned links %v, want one per interface", links)
	}
	ents, err := ext.Show(ns)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		st := e.Extra.(Status)
		got = append(got, st.Spec.String())
	}
	want := []string{
		"fc00:2::a2/128 End.AD inner ethernet oif up1 iif up1",
		"fc00:2::a5/128 End.AS inner ipv4 mac 02:00:00:00:00:01 oif sf1 iif sf1 src fc00:2::5 segs fc00:3::1,fc00:4::1 tag 3",
		"fc00:2::ad/128 End.AD inner ipv6 nh6 fc00:5f::2 oif sf0 iif sf0",
		"fc00:2::af/128 End.AD inner ipv6 nh6 fc00:5f::2 oif up0 iif up0 flow max 100 timeout 30",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("show:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// flow max: a cache of its own, of that size, gone with the SID.
	var afID uint32
	for _, e := range ents {
		if st := e.Extra.(Status); st.Spec.SID == af {
			afID = st.ID
		}
	}
	nd, err := Open(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Close()
	if m := nd.flowCap(afID); m == nil || m.MaxEntries() != 100 {
		t.Errorf("flow cache of %s: %v", af, m)
	} else {
		m.Close()
	}
	if ok, err := ext.Del(ns, af); !ok || err != nil {
		t.Fatalf("del %s: %v %v", af, ok, err)
	}
	if m := nd.flowCap(afID); m != nil {
		m.Close()
		t.Errorf("flow cache of %s survives its deletion", af)
	}
	if ok, err := ext.Del(ns, netip.MustParsePrefix("fc00:9::1/128")); ok || err != nil {
		t.Errorf("del of a non-proxy SID: %v %v", ok, err)
	}
	if ok, err := ext.Del(ns, ad); !ok || err != nil {
		t.Fatalf("del: %v %v", ok, err)
	}
	if !installed(ns) {
		t.Fatal("state gone while End.AS remains")
	}
	// Apply is declarative and idempotent.
	specs := []Spec{mustSpec(t, am, "End.AM", "nh6 fc00:5f::2 oif sf0 iif sf0")}
	for range 2 {
		if err := Apply(ns, specs); err != nil {
			t.Fatal(err)
		}
	}
	ents, _ = ext.Show(ns)
	if len(ents) != 1 || ents[0].SID != am {
		t.Errorf("after apply: %+v", ents)
	}
	if err := ext.Flush(ns); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("pin dir %s still there after flush: %v", dir, err)
	}
	if n := testutil.TCXIngressCount(t, ns, "sf0"); n != 0 {
		t.Errorf("%d programs still attached to sf0 after flush", n)
	}
}

func mustSpec(t *testing.T, sid netip.Prefix, b, params string) Spec {
	t.Helper()
	s, err := ParseSpec(sid, b, strings.Fields(params))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
